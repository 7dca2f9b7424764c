#include "cmd-inspect.h"

#include "cli-common.h"
#include "json-text.h"

#include <nlohmann/json.hpp>

#include <cstdio>

namespace cli {

void add_inspect_command(CLI::App & app, inspect_options & o) {
    CLI::App * cmd = app.add_subcommand("inspect", "describe a GGUF file, or check a target/draft pair, without loading weights");
    cmd->add_option("model", o.model, "model (GGUF), the target of a pair")->required();
    cmd->add_option("draft", o.draft_model, "draft model (GGUF)");
    cmd->add_option("--spec", o.spec, "strategy to check the pair for (auto: detect)")->capture_default_str();
    cmd->add_flag("--json", o.json, "print JSON on stdout");
}

namespace {

specdec_model_info inspect_or_throw(const std::string & path) {
    specdec_model_info info{};
    const specdec_status st = specdec_inspect(path.c_str(), &info);
    if (st != SPECDEC_STATUS_OK) {
        throw specdec::error(st, specdec_last_error());
    }
    return info;
}

nlohmann::json describe(const std::string & path, const specdec_model_info & m) {
    nlohmann::json strategies = nlohmann::json::array();
    for (int s = 0; s < SPECDEC_STRATEGY_COUNT; ++s) {
        if (m.strategies & (1u << s)) {
            strategies.push_back(specdec_strategy_name(static_cast<specdec_strategy>(s)));
        }
    }
    nlohmann::json j = {
        {"path", path},
        {"architecture", m.architecture},
        {"name", m.name},
        {"file_size", m.file_size},
        {"parameters", m.n_params},
        {"tensors", m.n_tensors},
        {"vocabulary", m.n_vocab},
        {"embedding_length", m.n_embd},
        {"block_count", m.n_layer},
        {"nextn_layers", m.n_layer_nextn},
        {"strategies", strategies},
    };
    if (m.n_target_layers > 0) {
        j["target_layers"] = std::vector<int32_t>(m.target_layers, m.target_layers + m.n_target_layers);
        j["target_hidden_size"] = m.target_hidden_size;
    }
    // Whether exact kernels cover its weights in this build (whether or not they are on now).
    const bool exact = specdec_check_exact(path.c_str()) == SPECDEC_STATUS_OK;
    j["exact_kernels"] = {{"exact", exact}, {"reason", exact ? "" : specdec_last_error()}};
    if (std::string(m.architecture) == "dflash") {
        j["block_size"] = m.block_size;
        j["variant"] = m.markov_head ? "dspark" : (m.dflash2 ? "dflash2" : "dflash");
    }
    return j;
}

void print_text(const nlohmann::json & m) {
    std::printf("%s\n", m["path"].get<std::string>().c_str());
    std::printf("  architecture   %s%s%s\n", m["architecture"].get<std::string>().c_str(),
                m["name"].get<std::string>().empty() ? "" : "  ", m["name"].get<std::string>().c_str());
    std::printf("  size           %.2f MiB, %llu parameters in %u tensors\n", m["file_size"].get<double>() / (1024.0 * 1024.0),
                m["parameters"].get<unsigned long long>(), m["tensors"].get<unsigned>());
    std::printf("  vocabulary     %u tokens\n", m["vocabulary"].get<unsigned>());
    std::printf("  shape          %u blocks (%u NextN), width %u\n", m["block_count"].get<unsigned>(),
                m["nextn_layers"].get<unsigned>(), m["embedding_length"].get<unsigned>());
    if (m.contains("target_layers")) {
        std::printf("  reads target   layers %s of width %u\n", json_text(m["target_layers"], -1).c_str(), m["target_hidden_size"].get<unsigned>());
    }
    if (m.contains("variant")) {
        std::printf("  block          %u (%s)\n", m["block_size"].get<unsigned>(), m["variant"].get<std::string>().c_str());
    }
    std::string list;
    for (const auto & s : m["strategies"]) {
        list += (list.empty() ? "" : ", ") + s.get<std::string>();
    }
    std::printf("  strategies     %s\n", list.empty() ? "(none)" : list.c_str());
    const auto & exact = m["exact_kernels"];
    if (exact["exact"].get<bool>()) {
        std::printf("  exact kernels  yes: each row of a batch computed as alone\n");
    } else {
        std::printf("  exact kernels  no: %s\n", exact["reason"].get<std::string>().c_str());
    }
}

} // namespace

int run_inspect(const inspect_options & o) {
    nlohmann::json out;
    out["model"] = describe(o.model, inspect_or_throw(o.model));
    int rc = exit_ok;
    if (!o.draft_model.empty()) {
        out["draft"] = describe(o.draft_model, inspect_or_throw(o.draft_model));
        specdec_strategy s = SPECDEC_STRATEGY_COUNT;
        specdec_status st = o.spec == "auto" ? specdec_detect_strategy(o.model.c_str(), o.draft_model.c_str(), &s)
                                             : specdec_strategy_from_name(o.spec.c_str(), &s);
        if (st == SPECDEC_STATUS_OK) {
            st = specdec_check_pair(o.model.c_str(), o.draft_model.c_str(), s);
        }
        out["pair"] = {{"strategy", st == SPECDEC_STATUS_OK || s != SPECDEC_STRATEGY_COUNT ? specdec_strategy_name(s) : nullptr},
                       {"compatible", st == SPECDEC_STATUS_OK},
                       {"status", specdec_status_name(st)},
                       {"reason", st == SPECDEC_STATUS_OK ? "" : specdec_last_error()}};
        rc = st == SPECDEC_STATUS_OK ? exit_ok : exit_failure;
    }
    if (o.json) {
        std::printf("%s\n", json_text(out).c_str());
        return rc;
    }
    print_text(out["model"]);
    if (out.contains("draft")) {
        print_text(out["draft"]);
        const auto & pair = out["pair"];
        if (pair["compatible"].get<bool>()) {
            std::printf("pair: compatible for '%s'\n", pair["strategy"].get<std::string>().c_str());
        } else {
            std::printf("pair: not compatible: %s: %s\n", pair["status"].get<std::string>().c_str(),
                        pair["reason"].get<std::string>().c_str());
        }
    }
    return rc;
}

} // namespace cli
