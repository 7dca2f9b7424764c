# Which ggml backends llama.cpp is built with, besides the CPU.
#
# SPECDEC_GPU (cache variable, or the environment variable of that name):
#   none    CPU only (default; what CI builds and tests)
#   cuda    NVIDIA GPUs through CUDA, for SPECDEC_CUDA_ARCHITECTURES
#           (default 90; "native" = the GPUs of the build host; a list such as
#           "86;89;90" builds each, and each adds minutes to the build)
#   vulkan  GPUs through Vulkan (needs the Vulkan headers and glslc)
# SPECDEC_RPC (ON by default): llama.cpp's RPC backend, which offloads layers
#   to `ggml-rpc-server` processes on other machines (`--rpc host:port,...`),
#   and that server itself, built as bin/ggml-rpc-server.

set(_specdec_gpu_default "$ENV{SPECDEC_GPU}")
if(NOT _specdec_gpu_default)
    set(_specdec_gpu_default none)
endif()
set(SPECDEC_GPU "${_specdec_gpu_default}" CACHE STRING "GPU backend: none, cuda or vulkan")
set_property(CACHE SPECDEC_GPU PROPERTY STRINGS none cuda vulkan)
set(_specdec_rpc_default ON)
if(DEFINED ENV{SPECDEC_RPC})
    set(_specdec_rpc_default "$ENV{SPECDEC_RPC}")
endif()
option(SPECDEC_RPC "Build llama.cpp's RPC backend and ggml-rpc-server" ${_specdec_rpc_default})
set(SPECDEC_CUDA_ARCHITECTURES "90" CACHE STRING "CUDA architectures for SPECDEC_GPU=cuda (e.g. 90, \"86;89\", native)")

set(GGML_CUDA OFF CACHE BOOL "" FORCE)
set(GGML_VULKAN OFF CACHE BOOL "" FORCE)
if(SPECDEC_GPU STREQUAL "cuda")
    if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
        set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "" FORCE)
    endif()
    set(CMAKE_CUDA_ARCHITECTURES "${SPECDEC_CUDA_ARCHITECTURES}" CACHE STRING "" FORCE)
    set(GGML_CUDA ON CACHE BOOL "" FORCE)
elseif(SPECDEC_GPU STREQUAL "vulkan")
    set(GGML_VULKAN ON CACHE BOOL "" FORCE)
elseif(NOT SPECDEC_GPU STREQUAL "none")
    message(FATAL_ERROR "SPECDEC_GPU='${SPECDEC_GPU}': expected none, cuda or vulkan")
endif()
set(GGML_RPC ${SPECDEC_RPC} CACHE BOOL "" FORCE)
set(_specdec_backends CPU)
if(NOT SPECDEC_GPU STREQUAL "none")
    string(TOUPPER "${SPECDEC_GPU}" _gpu)
    list(APPEND _specdec_backends "${_gpu}")
    if(SPECDEC_GPU STREQUAL "cuda")
        string(APPEND _specdec_backends " (architectures ${SPECDEC_CUDA_ARCHITECTURES})")
    endif()
endif()
if(SPECDEC_RPC)
    list(APPEND _specdec_backends RPC)
endif()
list(JOIN _specdec_backends ", " _specdec_backends)
message(STATUS "specdec: ggml backends: ${_specdec_backends}")
