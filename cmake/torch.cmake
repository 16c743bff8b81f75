# The torch side: comm, nn, runtime, data, pipeline, train, one library each,
# under the umbrella target baton_torch. The torch-free libraries (baton_base)
# never link LibTorch.
include(${CMAKE_CURRENT_LIST_DIR}/torch_wheel.cmake)
baton_prefer_wheel_c10()
find_package(Torch QUIET)
if(NOT Torch_FOUND)
  message(WARNING "LibTorch not found: building the torch-free part only")
  return()
endif()
# Debian's Gloo headers live in /usr/include; c10d's ProcessGroupGloo needs them.
find_path(GLOO_INCLUDE_DIR gloo/config.h)
# One library per module below the torch line, each linking the ones before
# it (CMakeLists.txt's baton_module); baton_torch is their umbrella.
set(_below ${BATON_BASE_LIBRARIES})
set(BATON_TORCH_LIBRARIES)
foreach(module ${BATON_TORCH_MODULES})
  file(GLOB _sources CONFIGURE_DEPENDS baton/${module}/*.cpp)
  foreach(unit ${BATON_TORCH_FREE_UNITS})
    list(FILTER _sources EXCLUDE REGEX "/${unit}$")
  endforeach()
  # CUDA-only sources end in _cuda.cpp and build only against a CUDA LibTorch.
  if(NOT TORCH_CUDA_LIBRARIES AND NOT CUDA_FOUND)
    list(FILTER _sources EXCLUDE REGEX "_cuda\\.cpp$")
  else()
    list(FILTER _sources EXCLUDE REGEX "_nocuda\\.cpp$")
  endif()
  baton_module(${module} "${_below}" ${_sources})
  if(module STREQUAL "comm")
    target_link_libraries(baton_comm PUBLIC ${TORCH_LIBRARIES})
    baton_wheel_link_options(baton_comm INTERFACE)
    # Installed, the torch targets carry LibTorch's include folders;
    # batonConfig.cmake finds Gloo's headers again on the user's machine.
    target_include_directories(baton_comm PUBLIC "$<BUILD_INTERFACE:${TORCH_INCLUDE_DIRS}>")
    if(GLOO_INCLUDE_DIR)
      target_include_directories(baton_comm PUBLIC $<BUILD_INTERFACE:${GLOO_INCLUDE_DIR}>)
    endif()
    # One precompiled torch header, reused by every torch module, test and the CLI.
    target_precompile_headers(baton_comm PRIVATE <torch/torch.h>)
  else()
    target_precompile_headers(baton_${module} REUSE_FROM baton_comm)
  endif()
  if(BATON_UNITY_TORCH)  # CMakeLists.txt says why
    set_target_properties(baton_${module} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  endif()
  list(APPEND _below baton_${module})
  list(APPEND BATON_TORCH_LIBRARIES baton_${module})
endforeach()
# baton/data decompresses the Fashion-MNIST .gz files with zlib.
target_link_libraries(baton_data PRIVATE z)
add_library(baton_torch INTERFACE)
target_link_libraries(baton_torch INTERFACE ${_below})
add_library(baton::torch ALIAS baton_torch)
set_target_properties(baton_torch PROPERTIES EXPORT_NAME torch)

# comm_peer: one rank of the multi-process tests in tests/comm/process_test.cpp,
# which finds it next to itself in tests/.
if(BATON_BUILD_TESTS)
  add_executable(comm_peer tests/comm/peer_main.cpp)
  target_link_libraries(comm_peer PRIVATE baton_torch)
  target_precompile_headers(comm_peer REUSE_FROM baton_comm)
  set_target_properties(comm_peer PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  function(baton_comm_peer_dependency)
    if(TARGET comm_process_test)
      add_dependencies(comm_process_test comm_peer)
    endif()
  endfunction()
  cmake_language(DEFER CALL baton_comm_peer_dependency)
endif()
