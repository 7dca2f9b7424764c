// The bounds checked on a GBNF grammar before llama.cpp's recursive parser
// sees it (issue 43: 100,000 nested groups crashed the server): nesting,
// the rule estimate and the size, each refused one past its limit and
// taken at it; literals, classes, tokens and comments do not count.
#include "grammar-limits.h"

#include "specdec/specdec.hpp"

#include <gtest/gtest.h>

#include <string>

namespace specdec::test {
namespace {

using detail::check_grammar_limits;

bool refused(const std::string & g) {
    try {
        check_grammar_limits(g);
    } catch (const error & e) {
        EXPECT_EQ(e.code(), SPECDEC_STATUS_INVALID_ARGUMENT);
        return true;
    }
    return false;
}

std::string groups(size_t depth) {
    return "root ::= " + std::string(depth, '(') + "\"a\"" + std::string(depth, ')');
}

// A chain of rules, each beginning with the next: llama.cpp recurses once per rule.
std::string chain(size_t n) {
    std::string g = "root ::= r1\n";
    for (size_t i = 1; i < n; ++i) {
        g += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + "\n";
    }
    return g + "r" + std::to_string(n) + " ::= \"a\"\n";
}

TEST(GrammarLimits, NestingIsRefusedOnePastTheLimit) {
    EXPECT_FALSE(refused(groups(SPECDEC_MAX_GRAMMAR_NESTING)));
    EXPECT_TRUE(refused(groups(SPECDEC_MAX_GRAMMAR_NESTING + 1)));
    EXPECT_TRUE(refused(groups(50000))); // 100 KB: under the size limit
    // Parentheses inside literals, classes, tokens and comments are text.
    const std::string text(30000, '(');
    EXPECT_FALSE(refused("root ::= \"" + text + "\" [" + text + "] <" + text + "> # " + text + "\n"));
    EXPECT_FALSE(refused("root ::= \"\\\"(((\" [\\](((]"));
    // Closing more than was opened does not earn depth.
    EXPECT_TRUE(refused("root ::= " + std::string(1000, ')') + std::string(SPECDEC_MAX_GRAMMAR_NESTING + 1, '(')));
}

TEST(GrammarLimits, RulesAreEstimatedFromDefinitionsGroupsAndRepetitions) {
    // Each definition counts one: the chain has n + 1 rules.
    EXPECT_FALSE(refused(chain(SPECDEC_MAX_GRAMMAR_RULES - 1)));
    EXPECT_TRUE(refused(chain(SPECDEC_MAX_GRAMMAR_RULES)));
    EXPECT_TRUE(refused(chain(6000)));
    // {m,n} counts n + 1; {m,} and {m} m + 1; *, + and ? one each.
    const std::string most = std::to_string(SPECDEC_MAX_GRAMMAR_RULES - 2);
    EXPECT_FALSE(refused("root ::= \"a\"{0," + most + "}"));
    EXPECT_TRUE(refused("root ::= \"a\"{0," + std::to_string(SPECDEC_MAX_GRAMMAR_RULES) + "}"));
    EXPECT_TRUE(refused("root ::= \"a\"{" + std::to_string(SPECDEC_MAX_GRAMMAR_RULES) + ",}"));
    EXPECT_TRUE(refused("root ::= \"a\"{99999999999999999999}")) << "saturates, does not wrap";
    std::string stars = "root ::= \"a\"";
    for (int i = 0; i < SPECDEC_MAX_GRAMMAR_RULES; ++i) {
        stars += "?";
    }
    EXPECT_TRUE(refused(stars));
}

TEST(GrammarLimits, SizeIsBounded) {
    const std::string literal = "root ::= \"" + std::string(SPECDEC_MAX_GRAMMAR_BYTES - 11, 'a') + "\"";
    EXPECT_EQ(literal.size(), size_t(SPECDEC_MAX_GRAMMAR_BYTES));
    EXPECT_FALSE(refused(literal));
    EXPECT_TRUE(refused(literal + " "));
}

} // namespace
} // namespace specdec::test
