// Uses both API surfaces of an installed specdec.
#include <specdec/specdec.h>
#include <specdec/specdec.hpp>

#include <cstdio>

int main() {
    specdec_session_params p = specdec_session_default_params();
    p.n_draft_max = 0;
    if (specdec_session_params_validate(&p) != SPECDEC_STATUS_INVALID_CONFIG) {
        return 1;
    }
    try {
        specdec::session s(nullptr, nullptr, specdec_session_default_params());
        return 1;
    } catch (const specdec::error & e) {
        if (e.code() != SPECDEC_STATUS_INVALID_ARGUMENT) {
            return 1;
        }
    }
    std::puts("consumer ok");
    return 0;
}
