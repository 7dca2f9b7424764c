#include "cmd-info.h"

#include "cli-common.h"

#include "ggml-backend.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#    include <cpuid.h>
#endif

namespace cli {

namespace {

// One x86-64 extension: ggml's name for it (as its CPU backend reports its
// compiled features) and whether this CPU has it.
struct cpu_feature {
    const char * ggml_name;
    bool         host;
};

#if defined(__x86_64__) || defined(__i386__)
// CPUID leaf 7 bits that not every compiler's __builtin_cpu_supports knows
// (clang 14 lacks avxvnni, avx512fp16 and amx-int8).
bool cpuid7_bit(unsigned subleaf, bool edx, unsigned bit) {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_count(7, subleaf, &a, &b, &c, &d) == 0) {
        return false;
    }
    return (((edx ? d : a) >> bit) & 1u) != 0;
}

bool cpuid1_ecx_bit(unsigned bit) { // F16C has no __builtin_cpu_supports name in GCC 12
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(1, &a, &b, &c, &d) != 0 && ((c >> bit) & 1u) != 0;
}
#endif

std::vector<cpu_feature> host_cpu_features() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return {
        {"SSE3", __builtin_cpu_supports("sse3") != 0},
        {"SSSE3", __builtin_cpu_supports("ssse3") != 0},
        {"AVX", __builtin_cpu_supports("avx") != 0},
        {"AVX2", __builtin_cpu_supports("avx2") != 0},
        {"F16C", cpuid1_ecx_bit(29)},
        {"FMA", __builtin_cpu_supports("fma") != 0},
        {"BMI2", __builtin_cpu_supports("bmi2") != 0},
        {"AVX_VNNI", cpuid7_bit(1, false, 4)},
        {"AVX512", __builtin_cpu_supports("avx512f") != 0 && __builtin_cpu_supports("avx512bw") != 0 &&
                   __builtin_cpu_supports("avx512dq") != 0 && __builtin_cpu_supports("avx512vl") != 0},
        {"AVX512_VBMI", __builtin_cpu_supports("avx512vbmi") != 0},
        {"AVX512_VNNI", __builtin_cpu_supports("avx512vnni") != 0},
        {"AVX512_BF16", __builtin_cpu_supports("avx512bf16") != 0},
        {"AVX512_FP16", cpuid7_bit(0, true, 23)},
        {"AMX_INT8", cpuid7_bit(0, true, 25)},
    };
#else
    return {};
#endif
}

// What the CPU backend says it was compiled with ("AVX2" -> "1", ...).
std::vector<std::pair<std::string, std::string>> compiled_cpu_features() {
    std::vector<std::pair<std::string, std::string>> out;
    ggml_backend_reg_t reg = ggml_backend_reg_by_name("CPU");
    if (reg == nullptr) {
        return out;
    }
    auto get = reinterpret_cast<ggml_backend_get_features_t>(ggml_backend_reg_get_proc_address(reg, "ggml_backend_get_features"));
    if (get == nullptr) {
        return out;
    }
    for (const ggml_backend_feature * f = get(reg); f != nullptr && f->name != nullptr; ++f) {
        out.emplace_back(f->name, f->value);
    }
    return out;
}

std::string cpu_model_name() {
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("model name", 0) == 0) {
            const size_t colon = line.find(':');
            return colon == std::string::npos ? line : line.substr(line.find_first_not_of(' ', colon + 1));
        }
    }
    return "unknown";
}

const char * device_type_name(enum ggml_backend_dev_type t) {
    switch (t) {
        case GGML_BACKEND_DEVICE_TYPE_CPU: return "CPU";
        case GGML_BACKEND_DEVICE_TYPE_GPU: return "GPU";
        case GGML_BACKEND_DEVICE_TYPE_IGPU: return "integrated GPU";
        case GGML_BACKEND_DEVICE_TYPE_ACCEL: return "accelerator";
        default: return "other";
    }
}

} // namespace

void add_info_command(CLI::App & app, info_options & o) {
    CLI::App * cmd = app.add_subcommand("info", "show the versions, the CPU kernels in use and the devices found");
    cmd->add_flag("--json", o.json, "print JSON on stdout");
    cmd->add_option("--rpc", o.rpc, "ggml-rpc-server endpoints host:port[,host:port...] to list as devices too");
}

std::string version_line() {
    return std::string("specdec ") + specdec_version() + " (llama.cpp " + specdec_llama_release() + ", commit " +
           specdec_llama_commit() + ")";
}

std::vector<std::string> cpu_features_missing() {
    std::vector<std::string> missing;
    const auto compiled = compiled_cpu_features();
    for (const cpu_feature & f : host_cpu_features()) {
        for (const auto & [name, value] : compiled) {
            if (name == f.ggml_name && value != "0" && !f.host) {
                missing.push_back(name);
            }
        }
    }
    return missing;
}

int run_info(const info_options & opt) {
    if (!opt.rpc.empty()) {
        specdec::rpc_add_servers(opt.rpc);
    }
    const auto compiled_list = compiled_cpu_features();
    nlohmann::json compiled = nlohmann::json::object();
    for (const auto & [name, value] : compiled_list) {
        compiled[name] = value;
    }
    nlohmann::json host = nlohmann::json::array();
    for (const cpu_feature & f : host_cpu_features()) {
        if (f.host) {
            host.push_back(f.ggml_name);
        }
    }
    nlohmann::json devices = nlohmann::json::array();
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
        ggml_backend_dev_t dev = ggml_backend_dev_get(i);
        size_t free = 0, total = 0;
        ggml_backend_dev_memory(dev, &free, &total);
        devices.push_back({{"name", ggml_backend_dev_name(dev)},
                           {"description", ggml_backend_dev_description(dev)},
                           {"type", device_type_name(ggml_backend_dev_type(dev))},
                           {"memory_total_bytes", total},
                           {"memory_free_bytes", free}});
    }
    const std::vector<std::string> missing = cpu_features_missing();
    nlohmann::json j = {
        {"specdec", specdec_version()},
        {"llama_cpp", {{"release", specdec_llama_release()}, {"commit", specdec_llama_commit()}}},
        {"cpu", {{"model", cpu_model_name()},
                 {"kernels", specdec_cpu_variant()},
                 {"exact_kernels", specdec_exact_kernels()},
                 {"compiled_features", compiled},
                 {"host_features", host},
                 {"missing_on_host", missing}}},
        {"devices", devices},
    };
    if (opt.json) {
        std::printf("%s\n", j.dump(2).c_str());
        return missing.empty() ? exit_ok : exit_failure;
    }
    std::printf("%s\n", version_line().c_str());
    std::printf("CPU:           %s\n", cpu_model_name().c_str());
    std::printf("CPU kernels:   %s\n", specdec_cpu_variant());
    std::printf("exact kernels: %s\n", specdec_exact_kernels() ? "yes (each row of a batch computed as alone; --kernels fast turns them off)"
                                                                 : "no: this llama.cpp lacks patches/0001 (output may depend on the batch)");
    std::string line;
    for (const auto & [name, value] : compiled_list) {
        line += " " + name + (value == "1" ? "" : "=" + value);
    }
    std::printf("ggml CPU backend, compiled with:%s\n", line.c_str());
    line.clear();
    for (const auto & name : host) {
        line += " " + name.get<std::string>();
    }
    std::printf("this CPU has:%s\n", line.c_str());
    if (!missing.empty()) {
        line.clear();
        for (const auto & name : missing) {
            line += " " + name;
        }
        std::printf("NOT RUNNABLE HERE: this CPU lacks%s (rebuild with SPECDEC_CPU=auto)\n", line.c_str());
    }
    std::printf("devices:\n");
    for (const auto & d : devices) {
        std::printf("  %s (%s): %s, %.1f GiB\n", d["name"].get<std::string>().c_str(), d["type"].get<std::string>().c_str(),
                    d["description"].get<std::string>().c_str(),
                    static_cast<double>(d["memory_total_bytes"].get<size_t>()) / (1024.0 * 1024.0 * 1024.0));
    }
    return missing.empty() ? exit_ok : exit_failure;
}

} // namespace cli
