# `cmake --install`: the headers, the static libraries of src/, a CMake package
# (find_package(deepspeed_cpp) → deepspeed_cpp::deepspeed) and a pkg-config file (deepspeed_cpp.pc).
# docs/install.md says how to use them; tests/install/ builds a program against the installed tree.
include(CMakePackageConfigHelpers)

# The one target a user links: the engine (runtime) and the model families, with everything below.
add_library(deepspeed INTERFACE)
target_link_libraries(deepspeed INTERFACE ds_runtime ds_models)
target_compile_features(deepspeed INTERFACE cxx_std_20)
add_library(deepspeed_cpp::deepspeed ALIAS deepspeed)

get_property(ds_layer_targets GLOBAL PROPERTY DS_LAYER_TARGETS)
set(ds_install_targets "")
foreach(target IN LISTS ds_layer_targets)
  get_property(type TARGET ${target} PROPERTY TYPE)
  if(type STREQUAL "MODULE_LIBRARY")  # a plugin loaded at run time (libds_sentencepiece.so): not linked
    install(TARGETS ${target} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  else()
    list(APPEND ds_install_targets ${target})
  endif()
endforeach()
install(TARGETS ${ds_install_targets} deepspeed EXPORT deepspeed_cppTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
# Layer headers keep their folder (#include "runtime/engine.h"); the public entry is <deepspeed/deepspeed.h>.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/src/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/deepspeed_cpp
        FILES_MATCHING PATTERN "*.h")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# The package re-finds what the libraries were linked with: the imported targets their link
# interfaces name (LibTorch, spdlog, nlohmann_json, MPI, OpenMP, liburing, ICU, sentencepiece, CUDA).
set(ds_imported "")
foreach(target IN LISTS ds_install_targets)
  get_property(links TARGET ${target} PROPERTY LINK_LIBRARIES)
  get_property(iface TARGET ${target} PROPERTY INTERFACE_LINK_LIBRARIES)
  foreach(dep IN LISTS links iface)
    if(dep MATCHES "::")
      string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" dep "${dep}")
      list(APPEND ds_imported "${dep}")
    endif()
  endforeach()
endforeach()
list(REMOVE_DUPLICATES ds_imported)
set(DS_PKG_FIND "")
set(ds_pc_requires spdlog nlohmann_json)
macro(ds_needs dep code)
  if("${dep}" IN_LIST ds_imported)
    string(APPEND DS_PKG_FIND "${code}\n")
  endif()
endmacro()
ds_needs(MPI::MPI_CXX "set(MPI_CXX_SKIP_MPICXX ON)\nfind_dependency(MPI COMPONENTS CXX)")
ds_needs(OpenMP::OpenMP_CXX "find_dependency(OpenMP)")
ds_needs(ICU::uc "find_dependency(ICU COMPONENTS uc)")
foreach(pc IN ITEMS LIBURING:liburing SENTENCEPIECE:sentencepiece CPP_HTTPLIB:cpp-httplib)
  string(REPLACE ":" ";" pc "${pc}")
  list(GET pc 0 var)
  list(GET pc 1 module)
  ds_needs(PkgConfig::${var} "find_dependency(PkgConfig)\npkg_check_modules(${var} REQUIRED IMPORTED_TARGET ${module})")
  if("PkgConfig::${var}" IN_LIST ds_imported)
    list(APPEND ds_pc_requires ${module})
  endif()
endforeach()
if("ICU::uc" IN_LIST ds_imported)
  list(APPEND ds_pc_requires icu-uc)
endif()
if(DS_WITH_NCCL)
  install(FILES ${PROJECT_SOURCE_DIR}/cmake/ds_nccl.cmake DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/deepspeed_cpp)
  string(APPEND DS_PKG_FIND "include(\${CMAKE_CURRENT_LIST_DIR}/ds_nccl.cmake)\n")
endif()

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/deepspeed_cppConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/deepspeed_cppConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/deepspeed_cpp)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/deepspeed_cppConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(EXPORT deepspeed_cppTargets NAMESPACE deepspeed_cpp:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/deepspeed_cpp)
install(FILES ${PROJECT_BINARY_DIR}/deepspeed_cppConfig.cmake ${PROJECT_BINARY_DIR}/deepspeed_cppConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/deepspeed_cpp)

# pkg-config: the static libraries in link order (a later layer first), then their dependencies.
set(DS_PC_LIBS "")
foreach(target IN LISTS ds_install_targets)
  string(PREPEND DS_PC_LIBS "-l${target} ")
endforeach()
get_filename_component(ds_torch_libdir "${TORCH_LIBRARY}" DIRECTORY)
string(APPEND DS_PC_LIBS "-L${ds_torch_libdir} -Wl,--no-as-needed -ltorch -ltorch_cpu -Wl,--as-needed -lc10")
set(MPI_CXX_SKIP_MPICXX ON)
find_package(MPI REQUIRED COMPONENTS CXX)
list(APPEND ds_pc_requires ompi-c)
if("OpenMP::OpenMP_CXX" IN_LIST ds_imported)
  find_package(OpenMP REQUIRED)
  string(APPEND DS_PC_LIBS " ${OpenMP_CXX_FLAGS}")
endif()
if(DS_WITH_NCCL)
  string(APPEND DS_PC_LIBS " -L${CUDAToolkit_LIBRARY_DIR} -lcudart ${DS_NCCL_LIBRARY}")
endif()
string(APPEND DS_PC_LIBS " -pthread")
set(DS_PC_CFLAGS "-std=c++20 ${TORCH_CXX_FLAGS}")
foreach(dir IN LISTS TORCH_INCLUDE_DIRS)
  if(NOT dir IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)  # never -isystem /usr/include
    string(APPEND DS_PC_CFLAGS " -isystem ${dir}")
  endif()
endforeach()
if(DS_WITH_NCCL)
  string(APPEND DS_PC_CFLAGS " -DDS_WITH_NCCL=1")
endif()
list(JOIN ds_pc_requires " " DS_PC_REQUIRES)
configure_file(${PROJECT_SOURCE_DIR}/cmake/deepspeed_cpp.pc.in ${PROJECT_BINARY_DIR}/deepspeed_cpp.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/deepspeed_cpp.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
