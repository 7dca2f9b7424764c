# Chooses the instruction sets llama.cpp's CPU kernels are compiled for,
# instead of -march=native: on hosts with AMX, llama.cpp v0.5.0's native
# build traps in its AMX kernels (quantized models) and computes wrong tokens
# with several sequences in one batch (F16). See docs/cpu-kernels.md.
#
# SPECDEC_CPU (cache variable, or the environment variable of that name when
# the cache has none):
#   auto    the widest set below that this host runs (default); never AMX
#   avx512  AVX2 set + AVX512 F/CD/VL/DQ/BW, with VBMI, VNNI and BF16 where the host has them
#   avx2    SSE4.2, AVX, F16C, FMA, AVX2, BMI2 (what every x86-64 CPU since 2013 runs)
#   sse42   SSE4.2 only
#   x64     baseline x86-64 (SSE2)
#   native  llama.cpp's own -march=native, AMX included: only where it was checked to be correct
# On other architectures every value but `native` means llama.cpp's default build.
#
# Sets SPECDEC_CPU_VARIANT (what was chosen) and SPECDEC_CPU_FLAGS (the
# llama.cpp options turned on), and forces llama.cpp's GGML_* options.

set(_specdec_cpu_default "$ENV{SPECDEC_CPU}")
if(NOT _specdec_cpu_default)
    set(_specdec_cpu_default auto)
endif()
set(SPECDEC_CPU "${_specdec_cpu_default}" CACHE STRING "CPU kernels: auto, avx512, avx2, sse42, x64 or native")
set_property(CACHE SPECDEC_CPU PROPERTY STRINGS auto avx512 avx2 sse42 x64 native)
if(NOT SPECDEC_CPU MATCHES "^(auto|avx512|avx2|sse42|x64|native)$")
    message(FATAL_ERROR "SPECDEC_CPU='${SPECDEC_CPU}': expected auto, avx512, avx2, sse42, x64 or native")
endif()

set(_specdec_x86 OFF)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64|i[3-6]86)$")
    set(_specdec_x86 ON)
endif()

# What the host supports, from cmake/cpu-probe.c.
set(_specdec_host "")
if(_specdec_x86 AND NOT CMAKE_CROSSCOMPILING)
    try_run(_specdec_probe_run _specdec_probe_built
        ${CMAKE_BINARY_DIR}/cpu-probe ${CMAKE_CURRENT_LIST_DIR}/cpu-probe.c
        RUN_OUTPUT_VARIABLE _specdec_probe_out)
    if(_specdec_probe_built AND _specdec_probe_run EQUAL 0)
        string(REPLACE "\n" ";" _specdec_host "${_specdec_probe_out}")
    endif()
endif()

function(_specdec_host_has out)
    set(_all ON)
    foreach(_f IN LISTS ARGN)
        if(NOT _f IN_LIST _specdec_host)
            set(_all OFF)
        endif()
    endforeach()
    set(${out} ${_all} PARENT_SCOPE)
endfunction()

set(_specdec_all_flags SSE42 AVX F16C FMA AVX2 BMI2 AVX_VNNI AVX512 AVX512_VBMI AVX512_VNNI AVX512_BF16
                       AMX_TILE AMX_INT8 AMX_BF16)
set(_specdec_on "")
set(_variant "${SPECDEC_CPU}")
if(NOT _specdec_x86)
    if(NOT _variant STREQUAL "native")
        set(_variant default)
    endif()
elseif(_variant STREQUAL "auto")
    _specdec_host_has(_avx512 avx512f avx512cd avx512vl avx512dq avx512bw)
    _specdec_host_has(_avx2 sse4.2 avx f16c fma avx2 bmi2)
    _specdec_host_has(_sse42 sse4.2)
    if(_avx512)
        set(_variant avx512)
    elseif(_avx2)
        set(_variant avx2)
    elseif(_sse42)
        set(_variant sse42)
    else()
        set(_variant x64)
    endif()
endif()

if(_variant STREQUAL "avx512")
    set(_specdec_on SSE42 AVX F16C FMA AVX2 BMI2 AVX512)
    foreach(_pair "avx512vbmi;AVX512_VBMI" "avx512vnni;AVX512_VNNI" "avx512bf16;AVX512_BF16")
        list(GET _pair 0 _probe)
        list(GET _pair 1 _flag)
        if(_probe IN_LIST _specdec_host)
            list(APPEND _specdec_on ${_flag})
        endif()
    endforeach()
elseif(_variant STREQUAL "avx2")
    set(_specdec_on SSE42 AVX F16C FMA AVX2 BMI2)
elseif(_variant STREQUAL "sse42")
    set(_specdec_on SSE42)
endif()

if(_variant STREQUAL "native")
    set(GGML_NATIVE ON CACHE BOOL "" FORCE)
    set(SPECDEC_CPU_FLAGS "native")
elseif(_variant STREQUAL "default")
    set(GGML_NATIVE OFF CACHE BOOL "" FORCE)
    set(SPECDEC_CPU_FLAGS "llama.cpp defaults")
else()
    set(GGML_NATIVE OFF CACHE BOOL "" FORCE)
    foreach(_flag IN LISTS _specdec_all_flags)
        if(_flag IN_LIST _specdec_on)
            set(GGML_${_flag} ON CACHE BOOL "" FORCE)
        else()
            set(GGML_${_flag} OFF CACHE BOOL "" FORCE)
        endif()
    endforeach()
    list(JOIN _specdec_on " " SPECDEC_CPU_FLAGS)
    if(NOT SPECDEC_CPU_FLAGS)
        set(SPECDEC_CPU_FLAGS "baseline")
    endif()
    # A host that lacks a chosen extension would stop with SIGILL at run time.
    set(_missing "")
    foreach(_pair "SSE42;sse4.2" "AVX;avx" "F16C;f16c" "FMA;fma" "AVX2;avx2" "BMI2;bmi2" "AVX512;avx512f"
                  "AVX512_VBMI;avx512vbmi" "AVX512_VNNI;avx512vnni" "AVX512_BF16;avx512bf16")
        list(GET _pair 0 _flag)
        list(GET _pair 1 _probe)
        if(_flag IN_LIST _specdec_on AND _specdec_host AND NOT _probe IN_LIST _specdec_host)
            list(APPEND _missing ${_probe})
        endif()
    endforeach()
    if(_missing)
        message(WARNING "SPECDEC_CPU=${SPECDEC_CPU}: this host lacks ${_missing}; the programs built here will not run on it")
    endif()
endif()
set(SPECDEC_CPU_VARIANT "${_variant}")
message(STATUS "specdec: CPU kernels '${SPECDEC_CPU_VARIANT}' (SPECDEC_CPU=${SPECDEC_CPU}): ${SPECDEC_CPU_FLAGS}")
