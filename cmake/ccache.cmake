# Compiles through ccache where there is one. Paths inside the checkout
# `root` are hashed relative to it (CCACHE_BASEDIR), and the compile's
# directory, which -g records, is left out of the hash (CCACHE_NOHASHDIR):
# a fresh clone elsewhere (CI's) then reuses what this one compiled.
# Included by the main build and by fuzz/ (a project of its own).
function(specdec_use_ccache root)
    find_program(SPECDEC_CCACHE ccache)
    if(SPECDEC_CCACHE)
        get_filename_component(_root "${root}" REALPATH)
        set(_launcher "${CMAKE_COMMAND}" -E env "CCACHE_BASEDIR=${_root}" CCACHE_NOHASHDIR=1 "${SPECDEC_CCACHE}")
        set(CMAKE_C_COMPILER_LAUNCHER   ${_launcher} PARENT_SCOPE)
        set(CMAKE_CXX_COMPILER_LAUNCHER ${_launcher} PARENT_SCOPE)
    endif()
endfunction()
