// Bounds on a GBNF grammar, checked before llama.cpp parses it. llama.cpp's
// grammar parser recurses once per nested group, and its left-recursion
// check and its matcher once per rule in a chain of rules that each begin
// with the next; a grammar of 100,000 nested groups (200 KB) overflows the
// stack. The text is scanned here without recursion, and a grammar whose
// nesting or rule count could run that deep is refused with a message.
#pragma once

#include <string_view>

namespace specdec::detail {

// Throws error(INVALID_ARGUMENT) when `gbnf` is longer than
// SPECDEC_MAX_GRAMMAR_BYTES, nests groups deeper than
// SPECDEC_MAX_GRAMMAR_NESTING, or could make more than
// SPECDEC_MAX_GRAMMAR_RULES rules (an upper estimate: every rule defined,
// every group, every *, + and ?, and each {m,n} counted as n + 1 rules, its
// most, or m + 1 when unbounded). Says nothing of whether the grammar
// parses: llama.cpp decides that.
void check_grammar_limits(std::string_view gbnf);

} // namespace specdec::detail
