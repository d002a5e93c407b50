# The layer order of DESIGN.md §3: each src/<folder> may include and link only folders before it.
# One list, read by src/CMakeLists.txt (which folders to add, each target's scope) and by
# cmake/check_layering.cmake (the `layering` ctest that refuses an include against the order).
set(DS_LAYERS
  util config comm format data aio nn precision optim offload parallel zero checkpoint profiling runtime
  models inference serve)
