// What this library is and what it was built on; the values come from the
// build (CMakeLists.txt), so they cannot drift from it.
#include "specdec/specdec.h"

extern "C" const char * specdec_version(void) { return SPECDEC_VERSION; }

extern "C" const char * specdec_llama_release(void) { return SPECDEC_BUILD_LLAMA_RELEASE; }

extern "C" const char * specdec_llama_commit(void) { return SPECDEC_BUILD_LLAMA_COMMIT; }

extern "C" const char * specdec_cpu_variant(void) { return SPECDEC_BUILD_CPU_VARIANT; }
