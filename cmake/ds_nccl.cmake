# DS_WITH_NCCL: the torch-free GPU parts (the NCCL communicator, pinned host buffers) built against
# the CUDA toolkit and NCCL alone; no CUDA LibTorch needed. Finds the toolkit under CUDAToolkit_ROOT,
# $CUDA_HOME or /usr/local/cuda, and NCCL under $NCCL_HOME or the toolkit, and gives the imported
# targets CUDA::cudart and ds::nccl.
if(NOT DEFINED CUDAToolkit_ROOT AND DEFINED ENV{CUDA_HOME})
  set(CUDAToolkit_ROOT "$ENV{CUDA_HOME}")
endif()
find_package(CUDAToolkit)
if(NOT CUDAToolkit_FOUND)
  message(FATAL_ERROR "DS_WITH_NCCL=ON needs the CUDA toolkit (cuda_runtime.h, libcudart): none was found; set "
                      "CUDA_HOME or -DCUDAToolkit_ROOT=<toolkit>, or configure with -DDS_WITH_NCCL=OFF")
endif()
find_path(DS_NCCL_INCLUDE_DIR nccl.h HINTS ENV NCCL_HOME ${CUDAToolkit_INCLUDE_DIRS} ENV CUDA_HOME
          PATH_SUFFIXES include)
find_library(DS_NCCL_LIBRARY nccl HINTS ENV NCCL_HOME ${CUDAToolkit_LIBRARY_DIR} ENV CUDA_HOME
             PATH_SUFFIXES lib lib64)
if(NOT DS_NCCL_INCLUDE_DIR OR NOT DS_NCCL_LIBRARY)
  message(FATAL_ERROR "DS_WITH_NCCL=ON needs NCCL (nccl.h: ${DS_NCCL_INCLUDE_DIR}, libnccl: ${DS_NCCL_LIBRARY}); "
                      "install it with the CUDA toolkit or set NCCL_HOME, or configure with -DDS_WITH_NCCL=OFF")
endif()
if(NOT TARGET ds::nccl)
  add_library(ds::nccl UNKNOWN IMPORTED)
  set_target_properties(ds::nccl PROPERTIES IMPORTED_LOCATION "${DS_NCCL_LIBRARY}"
                                            INTERFACE_INCLUDE_DIRECTORIES "${DS_NCCL_INCLUDE_DIR}")
endif()
message(STATUS "DS_WITH_NCCL: CUDA ${CUDAToolkit_VERSION} (${CUDAToolkit_INCLUDE_DIRS}), NCCL ${DS_NCCL_LIBRARY}")
