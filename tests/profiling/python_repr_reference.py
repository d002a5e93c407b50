"""Reference text for python_text_test: reads C99 hex floats, one per line, and prints repr() of
each (what Python's csv module writes for a float)."""
import sys

with open(sys.argv[1]) as f:
    for line in f.read().splitlines():
        print(repr(float.fromhex(line)))
