# Two fixes for building against the PyPI wheel's LibTorch on a machine that
# also has Debian's, shared by baton's build and its installed batonConfig:
# baton_prefer_wheel_c10() before find_package(Torch), and
# baton_wheel_link_options(<target> <scope>) after it.

# TorchConfig looks for libc10 in the system folders before its own, so a
# wheel's build would link both c10s (and crash at start-up). Point it at the
# c10 next to the chosen TorchConfig. Likewise its find_package(Caffe2) (which
# brings torch_cpu) finds Debian's Caffe2 config first when the prefix path
# names .../share/cmake/Torch rather than .../share/cmake: a program built
# against an installed baton then linked the wheel's headers with 1.13's
# libtorch_cpu (undefined 2.x symbols). Point Caffe2_DIR next to it too.
macro(baton_prefer_wheel_c10)
  # A prefix is .../share/cmake (holding Torch/) or .../share/cmake/Torch itself.
  foreach(_baton_prefix ${CMAKE_PREFIX_PATH} ${Torch_DIR})
    foreach(_baton_config "${_baton_prefix}/Torch" "${_baton_prefix}")
      if(EXISTS "${_baton_config}/TorchConfig.cmake" AND EXISTS "${_baton_config}/../../../lib/libc10.so")
        get_filename_component(_baton_c10 "${_baton_config}/../../../lib/libc10.so" ABSOLUTE)
        set(c10_LIBRARY "${_baton_c10}" CACHE FILEPATH "libc10 of the chosen LibTorch")
      endif()
      if(EXISTS "${_baton_config}/TorchConfig.cmake" AND EXISTS "${_baton_config}/../Caffe2/Caffe2Config.cmake")
        get_filename_component(_baton_caffe2 "${_baton_config}/../Caffe2" ABSOLUTE)
        set(Caffe2_DIR "${_baton_caffe2}" CACHE PATH "Caffe2 config of the chosen LibTorch" FORCE)
      endif()
    endforeach()
  endforeach()
endmacro()

# The wheel's libtorch_cuda.so finds NCCL, cuDNN, ... in site-packages/
# nvidia/*/lib at run time (its RUNPATH); the linker must see the same
# libraries, not older ones a CUDA toolkit installed system-wide.
function(baton_wheel_link_options target scope)
  get_filename_component(_site "${TORCH_INSTALL_PREFIX}/.." ABSOLUTE)
  file(GLOB _dirs LIST_DIRECTORIES true "${_site}/nvidia/*/lib")
  foreach(dir ${_dirs})
    target_link_options(${target} ${scope} "LINKER:-rpath-link,${dir}")
  endforeach()
endfunction()
