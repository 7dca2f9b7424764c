#include "serve-slots.h"

#include "serve-openai.h"
#include "serve-scheduler.h"
#include "serve-utf8.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <stdexcept>

namespace cli::serve {

namespace {

using json = nlohmann::json;

bool forbidden(uint32_t c) {
    return c <= 0x1F || c == 0x7F || (c >= 0x80 && c <= 0x9F) || c == 0xFF0E || c == 0x2215 || c == 0x2216 ||
           (c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF || c == 0xFFFD || c == 0xFEFF || c == '/' || c == '\\' || c == ':' ||
           c == '*' || c == '?' || c == '"' || c == '<' || c == '>' || c == '|';
}

double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Runs `f` on the engine thread; its error as the client's where it is the
// request's fault (a slot in use or out of range, a file that is not one
// of this server's), else as a failure of the server's (500, its reason logged).
void on_engine(const service & svc, const std::string & filename, const std::function<void(specdec::engine &)> & f) {
    try {
        svc.sched->call(f);
    } catch (const specdec::error & e) {
        switch (e.code()) {
            case SPECDEC_STATUS_STATE_MALFORMED:
            case SPECDEC_STATUS_STATE_VERSION:
            case SPECDEC_STATUS_STATE_CONFIG:
                throw invalid_request("'" + filename + "' is not a slot file this server can restore: " + e.what(), "filename");
            case SPECDEC_STATUS_STATE_SEQUENCE:
                throw invalid_request("'" + filename + "' was saved from another slot, and this server's drafter keeps " +
                                          "per-slot state that cannot move: restore it into the slot it was saved from",
                                      "id_slot");
            case SPECDEC_STATUS_INVALID_ARGUMENT:
            case SPECDEC_STATUS_BAD_SEQ_ID:
                throw invalid_request(e.what(), "id_slot");
            default:
                throw std::runtime_error(e.what());
        }
    }
}

} // namespace

bool valid_slot_filename(std::string_view name) {
    if (name.empty() || name.size() > 255) {
        return false;
    }
    for (size_t i = 0; i < name.size();) {
        const auto c = utf8_code_point(name, i);
        if (!c || forbidden(c->first)) {
            return false;
        }
        i += c->second;
    }
    return name.front() != ' ' && name.back() != ' ' && name.back() != '.' && name.find("..") == std::string_view::npos;
}

json slot_action_answer(const service & svc, const std::string & folder, std::string_view id, std::string_view query,
                        std::string_view body, const request_limits & limits) {
    uint32_t slot = 0;
    const bool digits = !id.empty() && id.size() <= 9 && id.find_first_not_of("0123456789") == std::string_view::npos;
    if (!digits || (slot = static_cast<uint32_t>(std::stoul(std::string(id)))) >= svc.n_slots) {
        throw invalid_request("no slot '" + std::string(id) + "': slots are numbered 0 to " + std::to_string(svc.n_slots - 1),
                              "id_slot");
    }
    std::string action;
    for (size_t at = 0; at <= query.size();) {
        const size_t end = std::min(query.find('&', at), query.size());
        const std::string_view pair = query.substr(at, end - at);
        if (pair.rfind("action=", 0) == 0) {
            action = std::string(pair.substr(7));
        }
        at = end + 1;
    }
    if (action == "erase") {
        size_t n = 0;
        on_engine(svc, "", [&](specdec::engine & e) { n = e.erase_slot(slot); });
        return {{"id_slot", slot}, {"n_erased", n}};
    }
    if (action != "save" && action != "restore") {
        throw invalid_request("'action' is " + (action.empty() ? std::string("missing") : "'" + action + "'") +
                                  "; it must be save, restore or erase",
                              "action");
    }
    const json j = parse_json_body(body, limits);
    const auto f = j.is_object() ? j.find("filename") : j.end();
    if (f == j.end() || !f->is_string()) {
        throw invalid_request("'filename' (a string) is required", "filename", "missing_field");
    }
    const std::string filename = f->get<std::string>();
    if (!valid_slot_filename(filename)) {
        throw invalid_request("'filename' must name a file in the slot folder: no path separator, \"..\", control or reserved "
                              "character, nor leading or trailing space or trailing '.'",
                              "filename");
    }
    const std::string path = folder + filename;
    const auto t0 = std::chrono::steady_clock::now();
    if (action == "save") {
        std::vector<uint8_t> blob;
        size_t n_tokens = 0;
        on_engine(svc, filename, [&](specdec::engine & e) { blob = e.export_slot(slot, n_tokens); });
        // Written beside it, then renamed: a reader never sees half a file.
        const std::string partial = path + ".partial";
        {
            std::ofstream out(partial, std::ios::binary | std::ios::trunc);
            out.write(reinterpret_cast<const char *>(blob.data()), static_cast<std::streamsize>(blob.size()));
            if (!out) {
                std::remove(partial.c_str());
                throw std::runtime_error("cannot write the slot file " + path);
            }
        }
        if (std::rename(partial.c_str(), path.c_str()) != 0) {
            std::remove(partial.c_str());
            throw std::runtime_error("cannot write the slot file " + path);
        }
        return {{"id_slot", slot}, {"filename", filename}, {"n_saved", n_tokens}, {"n_written", blob.size()},
                {"timings", {{"save_ms", ms_since(t0)}}}};
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        throw api_error(404, "invalid_request_error", "no slot file '" + filename + "' in the slot folder", "filename", "not_found");
    }
    const std::vector<uint8_t> blob((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    size_t n_restored = 0;
    on_engine(svc, filename, [&](specdec::engine & e) { n_restored = e.import_slot(slot, blob); });
    return {{"id_slot", slot}, {"filename", filename}, {"n_restored", n_restored}, {"n_read", blob.size()},
            {"timings", {{"restore_ms", ms_since(t0)}}}};
}

} // namespace cli::serve
