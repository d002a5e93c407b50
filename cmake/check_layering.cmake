# The layering check (ctest `layering`): every `#include "<folder>/..."` in src/<a>/ must name <a>
# itself or a folder before it in DESIGN.md §3's order (cmake/ds_layers.cmake), and every folder of
# src/ must be in that order. tools/, examples/, tests/ and benchmarks/ may include anything.
#   cmake -DDS_SOURCE_DIR=<repo> -P cmake/check_layering.cmake
if(NOT DS_SOURCE_DIR)
  get_filename_component(DS_SOURCE_DIR "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
endif()
include("${DS_SOURCE_DIR}/cmake/ds_layers.cmake")
string(REPLACE ";" " → " order_text "${DS_LAYERS}")

set(problems "")
file(GLOB folders LIST_DIRECTORIES true RELATIVE "${DS_SOURCE_DIR}/src" "${DS_SOURCE_DIR}/src/*")
foreach(folder IN LISTS folders)
  if(NOT IS_DIRECTORY "${DS_SOURCE_DIR}/src/${folder}")
    continue()
  endif()
  list(FIND DS_LAYERS "${folder}" own)
  if(own EQUAL -1)
    string(APPEND problems "src/${folder}/ is not in the layer order; add it to DS_LAYERS in cmake/ds_layers.cmake "
                           "where DESIGN.md §3 places it\n")
    continue()
  endif()
  file(GLOB_RECURSE sources RELATIVE "${DS_SOURCE_DIR}" "${DS_SOURCE_DIR}/src/${folder}/*.h"
       "${DS_SOURCE_DIR}/src/${folder}/*.hpp" "${DS_SOURCE_DIR}/src/${folder}/*.cpp" "${DS_SOURCE_DIR}/src/${folder}/*.cu")
  foreach(source IN LISTS sources)
    file(STRINGS "${DS_SOURCE_DIR}/${source}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<][a-z_]+/")
    foreach(line IN LISTS lines)
      if(NOT line MATCHES "#[ \t]*include[ \t]*[\"<]([a-z_]+)/([^\">]*)")
        continue()
      endif()
      set(target_folder "${CMAKE_MATCH_1}")
      set(header "${CMAKE_MATCH_1}/${CMAKE_MATCH_2}")
      if(target_folder STREQUAL "deepspeed")
        string(APPEND problems "${source}: includes \"${header}\", the public API; src/ code includes the layer headers\n")
        continue()
      endif()
      list(FIND DS_LAYERS "${target_folder}" other)
      if(other GREATER own)
        string(APPEND problems "${source}: includes \"${header}\" but ${target_folder}/ comes after ${folder}/ in "
                               "the layer order (${order_text}); move the shared piece down or invert the dependency\n")
      endif()
    endforeach()
  endforeach()
endforeach()

if(problems)
  message(FATAL_ERROR "layering: includes against DESIGN.md §3's order:\n${problems}")
endif()
message(STATUS "layering: src/ holds to ${order_text}")
