# ctest install_consumer: `cmake --install` the build into a fresh prefix, then configure, build and
# run tests/install/consumer (find_package(deepspeed_cpp), a custom module at ZeRO-2 and ZeRO-3)
# against it with the same compiler; and link the same object once more with only
# `pkg-config --libs deepspeed_cpp`, to prove the .pc file is complete.
set(prefix ${DS_WORK_DIR}/prefix)
set(consumer ${DS_WORK_DIR}/consumer)
file(REMOVE_RECURSE ${DS_WORK_DIR})

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install_consumer: ${what} failed (${rc}):\n${out}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

run("cmake --install ${DS_BUILD_DIR} --prefix ${prefix}" ${CMAKE_COMMAND} --install ${DS_BUILD_DIR} --prefix ${prefix})
set(launcher "")
if(DS_LAUNCHER)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${DS_LAUNCHER})
endif()
run("configuring the consumer against ${prefix}"
    ${CMAKE_COMMAND} -S ${DS_SOURCE_DIR}/tests/install/consumer -B ${consumer} -G ${DS_GENERATOR}
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${DS_CXX_COMPILER} -DCMAKE_PREFIX_PATH=${prefix} ${launcher})
run("building the consumer" ${CMAKE_COMMAND} --build ${consumer})
run("running the consumer" ${consumer}/two_layer_zero)
message(STATUS "${out}")
if(NOT out MATCHES "two_layer_zero: ok")
  message(FATAL_ERROR "install_consumer: two_layer_zero did not report ok:\n${out}")
endif()

find_program(PKG_CONFIG pkg-config)
if(NOT PKG_CONFIG)
  message(STATUS "install_consumer: no pkg-config here; deepspeed_cpp.pc not checked")
  return()
endif()
set(ENV{PKG_CONFIG_PATH} "${prefix}/lib/pkgconfig")
run("pkg-config --libs deepspeed_cpp" ${PKG_CONFIG} --libs deepspeed_cpp)
string(STRIP "${out}" libs)
separate_arguments(libs UNIX_COMMAND "${libs}")
file(GLOB_RECURSE object ${consumer}/*main.cpp.o)
run("linking the consumer with only pkg-config's flags"
    ${DS_CXX_COMPILER} ${object} ${libs} -o ${consumer}/two_layer_zero_pc)
message(STATUS "deepspeed_cpp.pc: links (${prefix}/lib/pkgconfig)")
