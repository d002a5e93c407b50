"""Reference bytes for csv_monitor_test: DeepSpeed's csvMonitor behaviour (deepspeed/monitor/
csv_monitor.py), restated with Python's own csv module so that its quoting, number text and line
endings are Python's, not ours.

usage: deepspeed_csv_reference.py LOG_DIR (EVENTS_FILE | restart)...
Each EVENTS_FILE is one write_events call (lines "tag<TAB>hex float<TAB>step<TAB>float|int");
"restart" starts a new monitor on the same directory, as a resumed run would.
"""
import csv
import os
import sys


class CsvReference:
    def __init__(self, log_dir):
        self.log_dir = log_dir
        self.filenames = []  # files this monitor has written a header into
        os.makedirs(log_dir, exist_ok=True)

    def write_events(self, events):
        for name, value, step in events:
            header = name.split('/')[-1]
            filename = name.replace('/', '_').replace(' ', '_')
            with open(self.log_dir + '/' + filename + '.csv', 'a+') as f:
                writer = csv.writer(f)
                if filename not in self.filenames:
                    self.filenames.append(filename)
                    writer.writerow(['step', header])
                writer.writerow([step, value])


def read_events(path):
    events = []
    with open(path) as f:
        for line in f.read().splitlines():
            tag, value, step, kind = line.split('\t')
            v = float.fromhex(value)
            events.append((tag, int(v) if kind == 'int' else v, int(step)))
    return events


def main():
    log_dir = sys.argv[1]
    monitor = CsvReference(log_dir)
    for arg in sys.argv[2:]:
        if arg == 'restart':
            monitor = CsvReference(log_dir)
        else:
            monitor.write_events(read_events(arg))
    print('OK')


main()
