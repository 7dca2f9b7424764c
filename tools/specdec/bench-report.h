// The reports of `specdec bench`: a Markdown table, a Markdown file and a
// speedup chart, all made from the bench's JSON document (see run_bench for
// its fields). Nothing here prints; failures throw specdec::error(IO_ERROR)
// with a message that says what to do, and a document lacking a field the
// report needs throws nlohmann::json::out_of_range (a bug in the caller).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>

namespace cli {

// The results as a Markdown table: a header, then one row per entry of
// bench["results"], each line ending in '\n'. "rounds" is the range of the
// row's speedup_by_round (each round's tokens/s over plain's in that round).
// Shares and achieved/limit are percentages (bookkeeping with one decimal);
// an "ours/upstream" column is added when any row has ours_over_upstream
// (blank in the rows without); "identical" is "n/a" where
// identical_to_plain is null (synthetic runs).
std::string bench_markdown_table(const nlohmann::json & bench);

// Writes a complete Markdown report to `path` (replaced if it exists): the
// settings, a warning when synthetic_acceptance is set, the table, and
// whether every run was identical to plain decoding.
void write_bench_markdown(const nlohmann::json & bench, const std::string & path);

// Renders speedup against draft length to `path` by running gnuplot from
// PATH, PNG or SVG by its extension (.png or .svg in any case; anything else
// throws before rendering). One line per (strategy, n_seq) over the
// fixed-length rows, its limit dashed in the same colour, adaptive rows as
// labelled points at their n_draft cap, and plain decoding as the reference
// at 1; plain rows alone give the reference only. `path` is replaced only
// when rendering succeeded.
void write_bench_chart(const nlohmann::json & bench, const std::string & path);

} // namespace cli
