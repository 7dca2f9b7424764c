/*
 * specdec: lossless speculative decoding on llama.cpp, C ABI.
 *
 * A session pairs a target llama_context with a drafter (MTP heads, an
 * EAGLE-3 / DFlash / DSpark / classic draft model, or an n-gram lookup) and
 * keeps the bookkeeping every speculative loop needs: which sequences have a
 * pending proposal, what the target has seen, statistics and checkpoints.
 *
 * Conventions
 *  - Every fallible function returns specdec_status; SPECDEC_STATUS_OK is 0
 *    and every other value is a failure. specdec_last_error() then holds a
 *    message saying what to change. Nothing is modified by a call that fails,
 *    unless its comment says otherwise.
 *  - No C++ exception ever crosses this interface, and no function aborts
 *    the process on bad input: inputs are validated before llama.cpp runs.
 *  - Threads: a session and the contexts it borrows are single-threaded;
 *    call all functions of one session from one thread at a time. Different
 *    sessions (over different contexts) may run on different threads.
 *    Speed: with llama.cpp's OpenMP build (the default), each thread that
 *    decodes gets a team of n_threads - 1 more threads, kept for the process's
 *    life; once the teams together hold more threads than the host has cores
 *    they sleep at every barrier instead of spinning. Where n_threads equals
 *    the cores, decode from one thread only: a model's first decode on one
 *    thread and the rest on another made plain decoding take 1.6 times as
 *    long a token on 2 cores (48 ms against 30).
 *  - Ownership: pointers passed in are borrowed for the duration of the call
 *    unless stated; a session borrows its contexts for its whole lifetime.
 */
#ifndef SPECDEC_H
#define SPECDEC_H

#include "llama.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && !defined(SPECDEC_STATIC)
#    ifdef SPECDEC_BUILD
#        define SPECDEC_API __declspec(dllexport)
#    else
#        define SPECDEC_API __declspec(dllimport)
#    endif
#else
#    define SPECDEC_API __attribute__((visibility("default")))
#endif

/* This header's version; specdec_version() is the library's. Semantic
 * versioning: from 1.0, a new MINOR adds and a new MAJOR breaks the ABI;
 * before it, a new MINOR may change structs (0.3.0 added fields to
 * specdec_generate_params, specdec_engine_params and specdec_engine_event:
 * rebuild against this header). */
#define SPECDEC_VERSION_MAJOR 0
#define SPECDEC_VERSION_MINOR 5
#define SPECDEC_VERSION_PATCH 0
#define SPECDEC_VERSION "0.5.0"

/* Upper bounds enforced by validation. */
#define SPECDEC_MAX_SEQ           256        /* sequences per session */
#define SPECDEC_MAX_DRAFT         128        /* tokens per proposal */
#define SPECDEC_MAX_PROMPT_TOKENS 16777216   /* tokens of history per sequence (2^24) */
#define SPECDEC_MAX_STATE_BYTES   67108864   /* bytes of one state blob (64 MiB) */
#define SPECDEC_MAX_GRAMMAR_BYTES   131072   /* bytes of one GBNF grammar (128 KiB: llama.cpp took 0.25 s to parse
                                                that many bytes of alternatives, and 29 s for 1 MiB, on a 2-core
                                                AMD EPYC; the time grows with the square of the size) */
#define SPECDEC_MAX_GRAMMAR_NESTING 128      /* groups within groups in a grammar */
#define SPECDEC_MAX_GRAMMAR_RULES   4096     /* rules a grammar may make, estimated from its text (see grammar) */

/*
 * Status codes, grouped by kind (see specdec_status_kind). Values are stable.
 */
typedef enum specdec_status {
    SPECDEC_STATUS_OK = 0,

    /* configuration: the caller passed a value outside its documented range */
    SPECDEC_STATUS_INVALID_ARGUMENT   = 100, /* null pointer, bad enum, malformed batch */
    SPECDEC_STATUS_INVALID_CONFIG     = 101, /* a session parameter is out of range */
    SPECDEC_STATUS_UNREPRESENTABLE_TEXT = 102, /* the vocabulary has no token for a byte of the text */
    SPECDEC_STATUS_BUFFER_TOO_SMALL   = 103, /* an output buffer's capacity is below the size reported */

    /* lifecycle: the call is not allowed in the session's current state */
    SPECDEC_STATUS_BAD_SEQ_ID         = 200, /* sequence id outside [0, n_seq) */
    SPECDEC_STATUS_PROPOSAL_PENDING   = 201, /* a proposal awaits accept() */
    SPECDEC_STATUS_NO_PROPOSAL        = 202, /* accept() without a pending proposal */
    SPECDEC_STATUS_ACCEPTED_TOO_MANY  = 203, /* accept() of more tokens than proposed */
    SPECDEC_STATUS_PROMPT_TOO_LONG    = 204, /* history beyond SPECDEC_MAX_PROMPT_TOKENS */
    SPECDEC_STATUS_POSITION_MISMATCH  = 205, /* n_past disagrees with what the session saw */
    SPECDEC_STATUS_CONTEXT_FULL       = 206, /* the target context has no room left */
    SPECDEC_STATUS_QUEUE_FULL         = 207, /* an engine's waiting queue holds max_waiting requests */
    SPECDEC_STATUS_UNKNOWN_REQUEST    = 208, /* a request id the engine never issued */

    /* compatibility: the models or contexts cannot serve the strategy */
    SPECDEC_STATUS_WRONG_CONTEXT_TYPE = 300, /* e.g. MTP draft context not of MTP type */
    SPECDEC_STATUS_SEQ_CAPACITY       = 301, /* a context holds fewer sequences than n_seq */
    SPECDEC_STATUS_BATCH_CAPACITY     = 302, /* n_batch / n_ubatch below n_draft_max + 1 */
    SPECDEC_STATUS_RECURRENT_SLOTS    = 303, /* n_rs_seq below n_draft_max on a recurrent model */
    SPECDEC_STATUS_WIDTH_MISMATCH     = 304, /* draft input width != target hidden width */
    SPECDEC_STATUS_LAYER_MISMATCH     = 305, /* draft extraction sites do not fit the target */
    SPECDEC_STATUS_VOCAB_MISMATCH     = 306, /* vocabularies differ */
    SPECDEC_STATUS_MODEL_UNSUPPORTED  = 307, /* the model lacks what the strategy needs */
    SPECDEC_STATUS_UNAVAILABLE        = 308, /* the llama.cpp build lacks the feature asked for */

    /* state: a checkpoint blob was rejected; the session is unchanged */
    SPECDEC_STATUS_STATE_MALFORMED    = 400, /* bad magic, truncated, trailing bytes, bad field */
    SPECDEC_STATUS_STATE_TOO_LARGE    = 401, /* above SPECDEC_MAX_STATE_BYTES */
    SPECDEC_STATUS_STATE_VERSION      = 402, /* written by an unknown format version */
    SPECDEC_STATUS_STATE_STRATEGY     = 403, /* written by another strategy */
    SPECDEC_STATUS_STATE_CONFIG       = 404, /* written under another configuration */
    SPECDEC_STATUS_STATE_SEQUENCE     = 405, /* written for another sequence */

    /* native: llama.cpp or the system failed */
    SPECDEC_STATUS_DECODE_FAILED      = 500, /* llama_decode returned non-zero */
    SPECDEC_STATUS_NATIVE_FAILURE     = 501, /* llama.cpp reported or raised an error */
    SPECDEC_STATUS_IO_ERROR           = 502, /* a file could not be read */
    SPECDEC_STATUS_OUT_OF_MEMORY      = 503,
    SPECDEC_STATUS_MALFORMED_FILE     = 504, /* not a readable GGUF file, or one llama.cpp cannot load */

    SPECDEC_STATUS_MAX_ENUM           = 0x7FFFFFFF /* not a status: makes any int a defined value */
} specdec_status;

typedef enum specdec_status_kind {
    SPECDEC_STATUS_KIND_NONE          = 0,
    SPECDEC_STATUS_KIND_CONFIGURATION = 1,
    SPECDEC_STATUS_KIND_LIFECYCLE     = 2,
    SPECDEC_STATUS_KIND_COMPATIBILITY = 3,
    SPECDEC_STATUS_KIND_STATE         = 4,
    SPECDEC_STATUS_KIND_NATIVE        = 5,
} specdec_status_kind;

/* The library's version, "MAJOR.MINOR.PATCH" (SPECDEC_VERSION of the build). Static storage. */
SPECDEC_API const char * specdec_version(void);
/* The llama.cpp the library was built on: its release tag ("v0.5.0") and its
 * commit (40 hex digits, or "unknown" when the tree had no git metadata).
 * Static storage. */
SPECDEC_API const char * specdec_llama_release(void);
SPECDEC_API const char * specdec_llama_commit(void);
/* The instruction sets llama.cpp's CPU kernels were compiled for, as chosen
 * at build time (SPECDEC_CPU): e.g. "avx512: SSE42 AVX F16C FMA AVX2 BMI2
 * AVX512 AVX512_VBMI AVX512_VNNI AVX512_BF16". Static storage. */
SPECDEC_API const char * specdec_cpu_variant(void);

/* Exact kernels: llama.cpp's CPU kernels compute each row of a batch exactly
 * as they compute that row alone, so greedy output is token for token the
 * same decoded alone, beside other sequences, or verified in a speculative
 * batch, even where two logits are within rounding of each other (random or
 * real weights: near-ties are common). They come from patches/0001 to the
 * pinned llama.cpp, applied by scripts/bootstrap.sh, and are on from the
 * moment the library is loaded (llama.cpp alone keeps its own paths).
 * Off restores llama.cpp's batch-dependent CPU paths (tiled and split-KV
 * flash attention, and a single row's dot product where several rows take
 * llamafile's sgemm, the IQ grid types' 8-row panel): faster prompt
 * processing, but greedy output that may differ from plain decoding after a
 * near-tie. The weight types llama.cpp's quantizer writes are covered on
 * x86 builds without AMX, but Q1_0 and Q2_0 (specdec_check_exact says per
 * file). Several sequences on a unified KV cache (kv_unified) cannot be
 * exact (a sequence's keys lie among the others' cells, summed in cell
 * order): under exact kernels generate and engines refuse them with
 * SPECDEC_STATUS_UNAVAILABLE (docs/robustness.md). Process-wide (it sets
 * the CPU backend, every model and context alike); change it only while no
 * decode runs. GPU backends are not covered. Returns
 * SPECDEC_STATUS_UNAVAILABLE (and leaves the kernels as they are) when asked
 * for exact kernels by a library built on a llama.cpp without the patches,
 * or with AMX (SPECDEC_CPU=native on an AMX host: exact kernels are then
 * off from the start). */
SPECDEC_API specdec_status specdec_set_exact_kernels(bool exact);
/* Whether exact kernels are on (false when the build lacks them). */
SPECDEC_API bool specdec_exact_kernels(void);

/* Kind of a status; SPECDEC_STATUS_KIND_NONE for OK and unknown values. */
SPECDEC_API specdec_status_kind specdec_status_kind_of(specdec_status status);
/* Stable identifier such as "PROPOSAL_PENDING"; "UNKNOWN" for other values. Static storage. */
SPECDEC_API const char * specdec_status_name(specdec_status status);
/* Message of the last failure on the calling thread ("" if none yet). Valid
 * until the next specdec call on this thread. */
SPECDEC_API const char * specdec_last_error(void);

/*
 * The drafters inside llama.cpp log through llama.cpp's "common" logger,
 * which writes to stdout and stderr and ignores llama_log_set. specdec
 * silences that logger once per process, when the first session is created,
 * unless this was called before; it never touches the level again, so a
 * level set later (here or by the host with common_log_set_verbosity_thold)
 * stays. Levels: -1 silent, 1 errors, 2 warnings, 3 information, 5 debug.
 * Process-wide; thread-safe with respect to session creation.
 */
SPECDEC_API void specdec_set_upstream_log_level(int level);

/*
 * Strategies. DFlash2 is a DFlash draft recognised from its metadata and
 * needs no value of its own.
 */
typedef enum specdec_strategy {
    SPECDEC_STRATEGY_MTP           = 0, /* the target's own nextn heads; draft = MTP context over the target model */
    SPECDEC_STRATEGY_EAGLE3        = 1, /* EAGLE-3 draft model fed with three target layers */
    SPECDEC_STRATEGY_DFLASH        = 2, /* DFlash / DFlash2 block-diffusion draft model */
    SPECDEC_STRATEGY_DSPARK        = 3, /* DFlash draft with a Markov head */
    SPECDEC_STRATEGY_DRAFT         = 4, /* classic small draft model sharing the vocabulary */
    SPECDEC_STRATEGY_NGRAM_SIMPLE  = 5, /* n-gram lookup in the history; no draft context */
    SPECDEC_STRATEGY_NGRAM_MAP_K   = 6,
    SPECDEC_STRATEGY_NGRAM_MAP_K4V = 7,
    SPECDEC_STRATEGY_NGRAM_MOD     = 8,
    SPECDEC_STRATEGY_NGRAM_CACHE   = 9,
    SPECDEC_STRATEGY_COUNT,
    SPECDEC_STRATEGY_MAX_ENUM      = 0x7FFFFFFF /* not a strategy: makes any int a defined value */
} specdec_strategy;

/* Short name such as "mtp" or "ngram-map-k"; NULL for invalid values. Static storage. */
SPECDEC_API const char * specdec_strategy_name(specdec_strategy strategy);
/* Parses a name printed by specdec_strategy_name. INVALID_ARGUMENT if unknown. */
SPECDEC_API specdec_status specdec_strategy_from_name(const char * name, specdec_strategy * out);
/* True when the strategy drafts from a draft context (all but the n-gram family). */
SPECDEC_API bool specdec_strategy_needs_draft_context(specdec_strategy strategy);

/*
 * Session parameters. Start from specdec_session_default_params().
 */
typedef struct specdec_session_params {
    specdec_strategy strategy;    /* default SPECDEC_STRATEGY_MTP */
    uint32_t         n_seq;       /* sequences, 1..SPECDEC_MAX_SEQ; default 1 */
    int32_t          n_draft_max; /* most tokens per proposal, 1..SPECDEC_MAX_DRAFT; default 3 */
    int32_t          n_draft_min; /* proposals shorter than this are dropped, 0..n_draft_max; default 0 */
    float            p_min;       /* drafting stops below this draft probability, [0, 1]; default 0 */
    int32_t          draft_vocab; /* the drafter scores only the first draft_vocab tokens of the ranking below
                                     (a restricted draft vocabulary; see specdec_session_init); 0 = the whole
                                     vocabulary; SPECDEC_DRAFT_VOCAB_AUTO = by vocabulary size; default 0: the
                                     tokenizer's first 32,768 of Qwen3's 151,936 ids hold only 88-95% of the
                                     tokens of code and English text (docs/cli.md), so restriction is asked
                                     for, with a ranking counted from such text, not assumed */
    const llama_token * draft_vocab_ranking; /* token ids, most frequent first, distinct, each < n_vocab, at least
                                     draft_vocab of them; NULL = derived from the tokenizer; borrowed during
                                     specdec_session_init only (get_params gives NULL); default NULL */
    size_t           n_draft_vocab_ranking; /* entries of draft_vocab_ranking (0 with NULL); default 0 */
} specdec_session_params;

/*
 * draft_vocab = SPECDEC_DRAFT_VOCAB_AUTO: SPECDEC_DRAFT_VOCAB_DEFAULT tokens
 * when the vocabulary holds more than SPECDEC_DRAFT_VOCAB_AUTO_MIN (Qwen3's
 * 151,936, Qwen3.5's 248,320: there the head's projection onto the whole
 * vocabulary is most of a drafting pass), else the whole vocabulary (a
 * projection onto 64k tokens or fewer costs little next to the head's block,
 * so there is little to gain for the risk of leaving out a token the target
 * writes). Also the whole vocabulary wherever a restriction is not available
 * (see specdec_session_init).
 */
#define SPECDEC_DRAFT_VOCAB_AUTO     (-1)
#define SPECDEC_DRAFT_VOCAB_DEFAULT  32768
#define SPECDEC_DRAFT_VOCAB_AUTO_MIN 65536

SPECDEC_API specdec_session_params specdec_session_default_params(void);

/* Checks parameters alone (no contexts): INVALID_CONFIG naming the field. */
SPECDEC_API specdec_status specdec_session_params_validate(const specdec_session_params * params);

typedef struct specdec_session specdec_session;

/*
 * Creates the draft context a strategy needs, after the model checks whose
 * failure would otherwise abort inside llama.cpp while the context is built
 * (e.g. an EAGLE-3 draft made for another target width, or an MTP context
 * over a model loaded without load_mtp). Starting from `cparams` (threads,
 * cache types, ...), it sets the context type (MTP or default), ctx_other =
 * target, n_ctx = the target's, and raises n_seq_max, n_batch, n_ubatch,
 * n_rs_seq (recurrent models) and the per-sequence outputs (DFlash blocks) to
 * what `params` needs.
 *  - draft_model: the draft model; NULL for MTP (the target's model is used).
 *  - *out: a new context the caller frees with llama_free, before `target`.
 * Errors: INVALID_CONFIG, INVALID_ARGUMENT (n-gram strategy, missing model),
 * the compatibility statuses, NATIVE_FAILURE (llama.cpp refused).
 */
SPECDEC_API specdec_status specdec_draft_context_init(
        struct llama_context         * target,
        struct llama_model           * draft_model,
        const specdec_session_params * params,
        struct llama_context_params    cparams,
        struct llama_context        ** out);

/*
 * Creates a session over `target` and `draft`.
 *  - target: a default-type context; must outlive the session.
 *  - draft:  MTP: a context of type LLAMA_CONTEXT_TYPE_MTP over the target's
 *            model; EAGLE3/DFLASH/DSPARK/DRAFT: a default context over the
 *            draft model; n-gram strategies: NULL. Must outlive the session.
 * The session turns on the hidden-state outputs its drafter reads on both
 * contexts (NextN rows, layer inputs) and sets them back as it found them
 * when it is freed, or when init fails. Every compatibility rule is checked
 * before llama.cpp is called; each failure has its own status. On success
 * *out owns a new session.
 *
 * A restricted draft vocabulary (params->draft_vocab > 0) applies to the MTP
 * strategy when specdec drives the head itself (one NextN head of qwen35,
 * qwen35moe, glm4moe, glm-dsa, deepseek2 or deepseek32, whose output matrix
 * is in host memory and not repacked by llama.cpp's CPU_REPACK buffers):
 * the session copies those rows of the head's output matrix once, llama.cpp
 * skips the head's projection onto the whole vocabulary, and every draft
 * token is the best (or is drawn from the renormalised distribution) among
 * the subset. Verification still covers the whole vocabulary: greedy output
 * and the sampled distribution are unchanged; a token outside the subset is
 * never drafted. Elsewhere an explicit draft_vocab is INVALID_CONFIG (AUTO
 * falls back to the whole vocabulary; get_params says which is in effect).
 * The default ranking: the end-of-generation tokens, then the normal and
 * byte tokens by score (SentencePiece / Unigram vocabularies) or by id (BPE:
 * ids follow the merge order, frequent pieces first), then the rest.
 * Errors besides the above: INVALID_CONFIG for draft_vocab above the
 * vocabulary or the ranking's length, or a ranking with an id out of range
 * or twice.
 */
SPECDEC_API specdec_status specdec_session_init(
        struct llama_context         * target,
        struct llama_context         * draft,
        const specdec_session_params * params,
        specdec_session             ** out);

/* Frees the session (not its contexts). NULL is a no-op. */
SPECDEC_API void specdec_session_free(specdec_session * session);

/*
 * Getters. Given a NULL session they set specdec_last_error() and return the
 * value their comment names, which a session never has.
 */

/* Parameters in effect; n_draft_max may be lower than requested when the
 * drafter cannot propose more (e.g. a DFlash block size). NULL: every field
 * zero (n_seq 0 marks it). */
SPECDEC_API specdec_session_params specdec_session_get_params(const specdec_session * session);

/*
 * Re-ranks the restricted draft vocabulary by how often each token occurred
 * (counted by the caller, e.g. in what a server generated): the subset
 * becomes the draft_vocab tokens with the highest counts[t]; ties, and
 * tokens never counted, in the default ranking's order (see
 * specdec_session_init; a draft_vocab_ranking given at init is not
 * consulted). The rows of the tokens that leave the subset are overwritten
 * with those of the tokens that enter it (a row of the head's output matrix
 * each, e.g. 840 bytes for a Q6_K head of width 1024), so a ranking that
 * changes little costs little. What is drafted changes; the output does not
 * (verification covers the whole vocabulary).
 *  - counts: n_counts counts, one per token id; n_counts must be the
 *    target's vocabulary size. Borrowed for the call.
 *  - n_entered (may be NULL): set to how many tokens entered the subset
 *    (0: it was already those tokens, and nothing was copied).
 * Call it between steps: every proposal completed (PROPOSAL_PENDING
 * otherwise). Errors: INVALID_CONFIG when no restricted vocabulary is in
 * effect (get_params' draft_vocab is 0), INVALID_ARGUMENT for NULL counts
 * or n_counts other than the vocabulary's size; the subset is unchanged on
 * error.
 */
SPECDEC_API specdec_status specdec_session_rank_draft_vocab(specdec_session * session, const uint64_t * counts,
                                                            size_t n_counts, int32_t * n_entered);

/* True when no sequence has a pending proposal (checkpoints need this).
 * NULL: false. */
SPECDEC_API bool specdec_session_is_quiescent(const specdec_session * session);

/* True when the drafter reads the target's hidden states, which the target
 * context then outputs for every token of every batch. NULL: false (the
 * error message tells it from a session whose drafter reads none). */
SPECDEC_API bool specdec_session_reads_target_features(const specdec_session * session);

/*
 * Optionally announces a fresh generation for `seq_id`: `prompt` holds the
 * tokens already decoded into the target for it (n_prompt may be 0). Replaces
 * the session's history of that sequence. Requires quiescence.
 * Errors: BAD_SEQ_ID, PROPOSAL_PENDING, PROMPT_TOO_LONG, INVALID_ARGUMENT.
 */
SPECDEC_API specdec_status specdec_session_begin(
        specdec_session   * session,
        llama_seq_id        seq_id,
        const llama_token * prompt,
        size_t              n_prompt);

/*
 * Decodes `batch` on the target context. The batch is validated first (see
 * specdec_session_process); llama_decode's failure is DECODE_FAILED, or
 * CONTEXT_FULL when it found no room. Allowed while proposals are pending:
 * this is how a proposal is verified.
 */
SPECDEC_API specdec_status specdec_session_decode_target(
        specdec_session          * session,
        const struct llama_batch * batch);

/*
 * Hands the drafter the batch the target has just decoded. Call it after
 * every target decode, including prompt chunks and verification batches.
 * The batch needs token ids, positions and one sequence id per token; each
 * sequence's tokens must be contiguous with consecutive positions, starting
 * at most at the end of what the session has seen of it. Tokens are appended
 * to each sequence's history at their positions.
 * Strategies that read the target's hidden states (MTP, EAGLE3, DFLASH,
 * DSPARK) process only the batch specdec_session_decode_target decoded last
 * (llama.cpp aborts when those states are missing); n-gram and classic draft
 * strategies also accept batches decoded directly with llama_decode.
 * Errors: INVALID_ARGUMENT (malformed batch, not the decoded batch),
 * BAD_SEQ_ID, BATCH_CAPACITY, POSITION_MISMATCH, PROMPT_TOO_LONG,
 * NATIVE_FAILURE (a draft decode failed; the history is unchanged).
 */
SPECDEC_API specdec_status specdec_session_process(
        specdec_session          * session,
        const struct llama_batch * batch);

/* decode_target, then process; a failed decode is never processed. */
SPECDEC_API specdec_status specdec_session_decode_target_and_process(
        specdec_session          * session,
        const struct llama_batch * batch);

/*
 * How a drafter samples its tokens for speculative sampling (see
 * specdec_accept_mode): the transforms of specdec_generate_params, applied
 * to the drafter's own distribution. Draws are a function of (seed, the
 * position the token is drafted for): the same seed, state and positions
 * give the same drafts.
 */
typedef struct specdec_draft_sampling {
    float    temperature; /* >= SPECDEC_MIN_SAMPLING_TEMPERATURE (lower: draft greedily, as with no sampling) */
    int32_t  top_k;       /* <= 0: off */
    float    top_p;       /* (0, 1]; 1: off */
    float    min_p;       /* [0, 1); 0: off */
    uint64_t seed;
} specdec_draft_sampling;

/* One sequence's drafting request. */
typedef struct specdec_draft_request {
    llama_seq_id seq_id;  /* sequence to draft for */
    llama_pos    n_past;  /* tokens in the target context for it (position of id_last) */
    llama_token  id_last; /* last token chosen by the target, not yet decoded */
    int32_t      n_max;   /* cap for this proposal, 0..n_draft_max; -1 = n_draft_max */
    const specdec_draft_sampling * sampling; /* NULL (default): the drafter's most likely tokens. Otherwise,
                                                borrowed for the call: each token is drawn from the drafter's
                                                distribution under these transforms, and that distribution is
                                                reported (specdec_session_proposal_probs) where the strategy
                                                has one (MTP through specdec's own driver); the others draft
                                                as with NULL and report none */
} specdec_draft_request;

/*
 * Drafts for several sequences at once (one batched drafter pass). Each
 * request's proposal is then read with specdec_session_proposal; a
 * non-empty proposal becomes pending until specdec_session_accept. The cap
 * is also lowered so that id_last and the proposal fit in the target context.
 * Errors: INVALID_ARGUMENT (duplicate sequence, bad token, n_max), BAD_SEQ_ID,
 * PROPOSAL_PENDING, POSITION_MISMATCH (n_past differs from the history the
 * session saw for that sequence), CONTEXT_FULL, NATIVE_FAILURE,
 * RECURRENT_SLOTS (a recurrent draft context could not drop the drafted
 * positions; the sequence was forgotten: begin() it again). On any error no
 * request has a proposal and the draft context holds no drafted token.
 */
SPECDEC_API specdec_status specdec_session_draft(
        specdec_session             * session,
        const specdec_draft_request * requests,
        size_t                        n_requests);

/*
 * The latest proposal for `seq_id` (possibly empty). *tokens stays valid
 * until the next draft, accept or free on this session.
 */
SPECDEC_API specdec_status specdec_session_proposal(
        const specdec_session * session,
        llama_seq_id            seq_id,
        const llama_token    ** tokens,
        size_t                * n_tokens);

/* One token of a drafter's distribution. */
typedef struct specdec_token_prob {
    llama_token token;
    float       p; /* probability, (0, 1] */
} specdec_token_prob;

/*
 * The distribution token `index` of the latest proposal for `seq_id` was
 * drawn from (requested with specdec_draft_request.sampling): *n_probs
 * entries, the drafted token among them, most likely first, summing to 1;
 * every token not listed has probability 0. *n_probs = 0 (and *probs NULL)
 * when the token was not sampled: no sampling asked, or a strategy without
 * a distribution (its draft is then a point mass on the token). *probs stays
 * valid until the next draft, accept or free on this session.
 * Errors: BAD_SEQ_ID, INVALID_ARGUMENT (index >= the proposal's length).
 */
SPECDEC_API specdec_status specdec_session_proposal_probs(
        const specdec_session     * session,
        llama_seq_id                seq_id,
        size_t                      index,
        const specdec_token_prob ** probs,
        size_t                    * n_probs);

/*
 * Reports how many leading tokens of the pending proposal the target
 * accepted (0 = all rejected) and completes the proposal. The history of the
 * sequence is cut after id_last and the accepted tokens.
 * Errors: BAD_SEQ_ID, NO_PROPOSAL, ACCEPTED_TOO_MANY, RECURRENT_SLOTS (a
 * recurrent draft context could not drop the rejected positions, e.g. a
 * processed batch ran past the proposal by more than n_rs_seq: the proposal
 * is completed and the sequence forgotten, so draft() answers
 * POSITION_MISMATCH until begin() is called again).
 */
SPECDEC_API specdec_status specdec_session_accept(
        specdec_session * session,
        llama_seq_id      seq_id,
        uint16_t          n_accepted);

/* Number of NextN heads of an MTP target (1 for most models); 0 for other
 * strategies; -1 for a NULL session (specdec_last_error() is set). */
SPECDEC_API int32_t specdec_session_n_nextn_heads(const specdec_session * session);

/* Selects which NextN head the MTP draft context runs, 0..n_nextn_heads-1.
 * Errors: MODEL_UNSUPPORTED (not MTP), INVALID_ARGUMENT (out of range). */
SPECDEC_API specdec_status specdec_session_set_nextn_head(specdec_session * session, int32_t head);

/*
 * Checkpoints of the session's per-sequence state (history, configuration and
 * the drafter's own bytes) as a versioned little-endian blob of at most
 * SPECDEC_MAX_STATE_BYTES. Capture and restore need quiescence; checkpoint
 * the target and draft contexts at the same point (see context_state below)
 * and restore them before the session state.
 * state_get: writes the blob into dst if capacity suffices; *n_written is the
 * blob size either way (call with dst = NULL, capacity = 0 to size it).
 * Errors: BAD_SEQ_ID, PROPOSAL_PENDING, INVALID_ARGUMENT (dst NULL with
 * capacity > 0), BUFFER_TOO_SMALL (*n_written set; before 0.5.0: INVALID_ARGUMENT).
 */
SPECDEC_API specdec_status specdec_session_state_get(
        const specdec_session * session,
        llama_seq_id            seq_id,
        uint8_t               * dst,
        size_t                  capacity,
        size_t                * n_written);

/* Restores a blob from specdec_session_state_get into seq_id: the sequence
 * it was captured from, or any other where the drafter's state can move
 * (specdec_session_can_move_sequences; else STATE_SEQUENCE). Every field is
 * validated first, the drafter's own bytes included (STATE_MALFORMED when
 * their size is not what this session's drafter writes); on any failure
 * (STATE_* codes, BAD_SEQ_ID, PROPOSAL_PENDING) the session is unchanged. */
SPECDEC_API specdec_status specdec_session_state_set(
        specdec_session * session,
        llama_seq_id      seq_id,
        const uint8_t   * src,
        size_t            size);

/* Which borrowed context a call addresses. */
typedef enum specdec_context_role {
    SPECDEC_CONTEXT_TARGET = 0,
    SPECDEC_CONTEXT_DRAFT  = 1,
    SPECDEC_CONTEXT_MAX_ENUM = 0x7FFFFFFF /* not a role: makes any int a defined value */
} specdec_context_role;

/*
 * Removes positions [p0, p1) of `seq_id` from a context's memory (p0 < 0:
 * from 0; p1 < 0: to the end) and cuts the session history at p0 when the
 * target is addressed. Refused while that sequence has a pending proposal
 * (other sequences may have one).
 * Errors: BAD_SEQ_ID, PROPOSAL_PENDING, MODEL_UNSUPPORTED (no draft context,
 * or the memory cannot drop a partial range, as recurrent memory beyond its
 * rollback slots).
 */
SPECDEC_API specdec_status specdec_session_remove_range(
        specdec_session    * session,
        specdec_context_role role,
        llama_seq_id         seq_id,
        llama_pos            p0,
        llama_pos            p1);

/*
 * Moves sequence `from` into sequence `to`: its cells in the target and
 * draft contexts, its history and its drafter state; `from` is empty
 * afterwards, and what is generated from `to` next is what `from` would
 * have given. Why: with a KV stream per sequence (llama.cpp's default, no
 * kv_unified) a batch is decoded in one forward pass per run of
 * consecutive sequence ids holding equal rows, so a scheduler whose
 * sequences leave gaps pays a pass per gap; moving the highest sequences
 * down closes them (specdec_engine does). Cost: a copy of the sequence's
 * cells through host memory, in each context. A recurrent memory's
 * rollback snapshots do not move: move after the rejected positions of the
 * last verification are removed (the engine moves between steps).
 * Errors, nothing changed: BAD_SEQ_ID, INVALID_ARGUMENT (from == to, or
 * `to` holds positions in the target), PROPOSAL_PENDING (either sequence),
 * MODEL_UNSUPPORTED (see specdec_session_can_move_sequences); NATIVE_FAILURE
 * when llama.cpp refuses the copy (`to` is emptied, `from` is intact).
 */
SPECDEC_API specdec_status specdec_session_move_sequence(
        specdec_session * session,
        llama_seq_id      from,
        llama_seq_id      to);

/*
 * Copies sequence `from` into the empty sequence `to`, as move_sequence
 * moves it but leaving `from` as it was: its cells in the target and draft
 * contexts, its history and its drafter state, so that both go on from the
 * same point (n continuations of one prompt decoded once). Same cost,
 * conditions and errors as specdec_session_move_sequence (NATIVE_FAILURE:
 * `to` is emptied, `from` is intact).
 */
SPECDEC_API specdec_status specdec_session_copy_sequence(
        specdec_session * session,
        llama_seq_id      from,
        llama_seq_id      to);

/* Whether specdec_session_move_sequence (and copy) works with this session's drafter:
 * MTP where specdec drives the head (a single NextN head with a cache of its
 * own), DRAFT and NGRAM_SIMPLE. The other drafters keep per-sequence state
 * inside llama.cpp that its API cannot move. false for NULL. */
SPECDEC_API bool specdec_session_can_move_sequences(const specdec_session * session);

/*
 * Per-sequence context state (llama_state_seq_*_ext with `flags`), so that a
 * checkpoint can hold target, draft and session state taken at one point.
 * context_state_get: *n_written is the required size; writes when capacity
 * suffices (dst = NULL, capacity = 0 to size it; a smaller capacity:
 * BUFFER_TOO_SMALL, as state_get).
 */
SPECDEC_API specdec_status specdec_session_context_state_get(
        specdec_session    * session,
        specdec_context_role role,
        llama_seq_id         seq_id,
        uint32_t             flags,
        uint8_t            * dst,
        size_t               capacity,
        size_t             * n_written);

/* Restores bytes from context_state_get. NATIVE_FAILURE if llama.cpp rejects them. */
SPECDEC_API specdec_status specdec_session_context_state_set(
        specdec_session    * session,
        specdec_context_role role,
        llama_seq_id         seq_id,
        uint32_t             flags,
        const uint8_t      * src,
        size_t               size);

/* Counters and timings since the session was created. Times are microseconds. */
typedef struct specdec_session_stats {
    uint64_t n_begin;        /* begin calls */
    uint64_t n_process;      /* process calls */
    uint64_t n_draft;        /* sequences asked to draft */
    uint64_t n_proposals;    /* non-empty proposals */
    uint64_t n_drafted;      /* tokens proposed */
    uint64_t n_accept;       /* accept calls */
    uint64_t n_accepted;     /* tokens accepted */
    uint64_t n_accepted_at[SPECDEC_MAX_DRAFT]; /* [i]: proposals whose token i was accepted */
    int64_t  t_begin_us;
    int64_t  t_process_us;
    int64_t  t_draft_us;
    int64_t  t_accept_us;
} specdec_session_stats;

/* NULL session: every field zero, and specdec_last_error() is set (a new
 * session also has zero counters; the message tells them apart). */
SPECDEC_API specdec_session_stats specdec_session_get_stats(const specdec_session * session);

/*
 * ---------------------------------------------------------------------------
 * Generation: the complete draft -> verify -> accept loop.
 * ---------------------------------------------------------------------------
 * Greedy output is token-identical to plain decoding by the target. Sampled
 * output keeps the target's distribution exactly: every emitted token is
 * drawn from the target's own distribution at its position (a drafted token
 * is kept only when the draw equals it), with one draw per emitted token, so
 * a seeded speculative run equals a seeded plain run token for token.
 */

/*
 * Adaptive draft length (specdec_generate_params.n_draft): before every step
 * each sequence's length is chosen within [0, session n_draft_max] to make the
 * expected tokens per second largest, from a running estimate of that
 * sequence's acceptance (the chance that a drafted token is kept after a kept
 * token, and after a rejected one; recent steps weigh most, so the choice
 * turns with the text) and the costs measured in this call: verifying a
 * batch of each number of rows, and a drafting pass over each number of
 * rows. A sequence given length 0 still drafts one "shadow" token now and
 * then, never verified, only compared with the target's token: once the
 * saving it expects to have missed since its last one (its chance of a hit
 * at each step, times what a hit would save) reaches the price of a drafting
 * pass, and at a sequence's first step. Never while even an always-right
 * drafter would not beat plain decoding at the measured costs. Output is the
 * same as with any fixed length; a length below the session's n_draft_min
 * is raised to it (or to 0 when that does not fit). Sequence statistics
 * count verified drafts only; the session's statistics also count shadow
 * drafts.
 */
#define SPECDEC_N_DRAFT_AUTO (-2)

/*
 * The lowest temperature that samples. Below it a request is greedy: the
 * distribution is already its argmax unless two logits lie within about
 * 1e-3 of each other, and much smaller temperatures divide logits into
 * infinities (1e-38 made every draw the last token of the vocabulary).
 */
#define SPECDEC_MIN_SAMPLING_TEMPERATURE 1e-4f

/* Log-probabilities, when asked (specdec_generate_params.n_top_logprobs). */
#define SPECDEC_MAX_TOP_LOGPROBS 20

typedef struct specdec_token_logprob {
    llama_token token;
    float       logprob; /* natural log of the target's probability of `token` at that position: the
                            log-softmax of its logits, before temperature and top-k/top-p/min-p */
} specdec_token_logprob;

/*
 * How a drafted token is kept when a request samples (temperature >=
 * SPECDEC_MIN_SAMPLING_TEMPERATURE; greedy requests keep a drafted token
 * exactly when it is the target's argmax, in either mode).
 */
typedef enum specdec_accept_mode {
    /* The target draws its token at each verification row with plain decoding's seeded sampler, and a
     * drafted token is kept when it equals that draw: seed for seed the tokens plain decoding gives.
     * A drafted token x is kept with probability p(x), where p is the target's distribution. */
    SPECDEC_ACCEPT_EXACT     = 0,
    /* Speculative sampling: x, drawn by the drafter from q, is kept with probability min(1, p(x) / q(x));
     * after a rejection the token is drawn from max(0, p - q), normalised, and the row after the last
     * kept draft is drawn from p. Each token has exactly the target's distribution p (not plain decoding's
     * draws), and a draft is kept with probability sum_t min(p(t), q(t)). The same seed, drafts and
     * configuration give the same tokens; with n_draft = SPECDEC_N_DRAFT_AUTO the drafts' lengths depend on
     * measured costs, so two runs may differ (in their draws, not their distribution). A drafter without a
     * distribution (every strategy but MTP) drafts its most likely token, a point mass q: x is then kept
     * with probability p(x), as in EXACT. Plain decoding (no drafter, or n_draft = 0) draws as in EXACT, and so
     * does synthetic_acceptance (whose drafts are kept without the target). */
    SPECDEC_ACCEPT_REJECTION = 1,
    SPECDEC_ACCEPT_MAX_ENUM  = 0x7FFFFFFF /* not a mode: makes any int a defined value */
} specdec_accept_mode;

/* A bias added to one token's logit before a token is chosen. */
typedef struct specdec_logit_bias {
    llama_token token;
    float       bias; /* finite, or -INFINITY: never chosen */
} specdec_logit_bias;

typedef struct specdec_generate_params {
    int32_t              n_predict;      /* most new tokens per sequence, >= 0; default 128 */
    int32_t              n_draft;        /* tokens drafted per step: 0..session n_draft_max, -1 = n_draft_max,
                                            SPECDEC_N_DRAFT_AUTO = chosen per step; default -1 */
    float                temperature;    /* below SPECDEC_MIN_SAMPLING_TEMPERATURE (0 and negatives included):
                                            greedy (argmax, lowest id on ties); default 0 */
    int32_t              top_k;          /* keep the k most likely tokens; <= 0: off; default 0 */
    float                top_p;          /* nucleus mass in (0, 1]; 1: off; default 1 */
    float                min_p;          /* drop tokens below min_p x the top probability, [0, 1); default 0 */
    uint32_t             seed;           /* sampling seed; sequence i uses seed + i; default 0 */
    bool                 ignore_eog;     /* keep going past end-of-generation tokens; default false */
    const char * const * stop_strings;   /* stop as soon as the text contains one of these (non-empty,
                                            NUL-terminated, borrowed for the call); the text is cut before
                                            the occurrence that starts earliest, whichever string it is */
    size_t               n_stop_strings;
    float                synthetic_acceptance; /* BENCHMARKING ONLY; < 0: off (default -1). In [0, 1]: a
                                                  drafted token is kept with this probability when the ones
                                                  before it were (never a drafted end-of-generation token),
                                                  whatever the target predicts, so the output is NOT the
                                                  target's text: it measures speed at a chosen acceptance
                                                  with an untrained drafter. Seeded by seed + sequence. */
    int32_t              n_top_logprobs; /* < 0: no log-probabilities (default -1). 0..SPECDEC_MAX_TOP_LOGPROBS:
                                            each output token's log-probability, and the n most likely tokens
                                            at its position (most likely first; equal logits: lowest id
                                            first), read from the verification logits that chose it (no
                                            extra decode): what plain decoding reports, with exact kernels */
    bool                 prompt_logprobs; /* with n_top_logprobs >= 0: also each prompt token's log-probability
                                             after the tokens before it (the first token has none), and its
                                             alternatives, as evaluation harnesses score text (OpenAI's echo).
                                             The prompt is then decoded whole, every row with logits (no prompt
                                             reuse). Default false */
    /* What is done to the target's logits before each token is chosen, greedy or sampled, at every
     * verification row as in plain decoding (each row sees exactly the tokens emitted before it, so
     * speculation stays lossless). The log-probabilities above are of the logits before all of it. */
    const specdec_logit_bias * logit_bias; /* n_logit_bias entries, borrowed for the call (copied); default NULL */
    size_t               n_logit_bias;
    float                presence_penalty;  /* [-2, 2]: subtracted once from each token already generated; default 0 */
    float                frequency_penalty; /* [-2, 2]: subtracted per time a token was generated; default 0 */
    float                repeat_penalty;    /* > 0 (llama.cpp's): the logits of the last repeat_last_n generated
                                               tokens are divided by it (positive) or multiplied (negative); default 1 */
    int32_t              repeat_last_n;     /* >= 0, the tokens repeat_penalty looks back over; default 64 */
    const char *         grammar;           /* a GBNF grammar (llama.cpp's format, root rule "root") the output
                                               must follow; NULL or "": none. Copied. A grammar that does not
                                               parse, or over SPECDEC_MAX_GRAMMAR_BYTES, nesting groups deeper than
                                               SPECDEC_MAX_GRAMMAR_NESTING or that could make more than
                                               SPECDEC_MAX_GRAMMAR_RULES rules (each rule, group, *, + and ?
                                               counts one, and {m,n} n + 1; llama.cpp recurses once per level of
                                               each): INVALID_ARGUMENT. A grammar that allows no token at some
                                               point ends the request with SPECDEC_STOP_ERROR. Cost: the first
                                               time output reaches a state of the grammar (its positions in the
                                               rules), a sampled request has every token of the vocabulary
                                               checked against it (tens of milliseconds at 150,000 tokens); an
                                               engine remembers the tokens of the states its requests met, for
                                               every later request with the same grammar (up to 32 MiB, the
                                               least recently used forgotten first). A greedy request checks
                                               its favourite token, then the best-ranked others until one is
                                               allowed. Default NULL */
    const char * const * grammar_triggers;  /* a lazy grammar: regular expressions (ECMAScript, as llama.cpp's lazy
                                               grammar sampler takes them; borrowed for the call, copied). The
                                               grammar is not applied until the output's text matches one; from
                                               then on the text from the match (its first capture group, if any)
                                               must follow it, as llama.cpp's tool-call grammars ask. Output that
                                               leaves it there ends the request with SPECDEC_STOP_ERROR. NULL: the
                                               grammar applies from the first token; default NULL */
    size_t               n_grammar_triggers;
    const char *         grammar_prefix;    /* text the grammar reads before the output (tokenized with the
                                               target's vocabulary, special tokens included): a chat template's
                                               generation prompt, which llama.cpp's tool-call grammars begin
                                               with. Not with grammar_triggers. A prefix the grammar refuses:
                                               INVALID_ARGUMENT; one the vocabulary cannot represent:
                                               UNREPRESENTABLE_TEXT. NULL or "": none. Copied. Default NULL */
    specdec_accept_mode  accept;            /* how drafts are kept when sampling; default SPECDEC_ACCEPT_REJECTION
                                               (docs/sampling.md says why; a zeroed struct holds EXACT) */
    /* A thinking model's reasoning block, as llama.cpp's reasoning budget keeps it. With both markers
     * set, the output's blocks are tracked: a block opens where reasoning_start is written (or in
     * reasoning_prefix) and closes where reasoning_end is; a lazy grammar (grammar_triggers) does not apply
     * inside one, so a trigger in the reasoning starts nothing. Every marker and message is tokenized
     * with the target's vocabulary, special tokens included, and copied. */
    const char *         reasoning_start;   /* text that opens a block (e.g. "<think>"); NULL or "": none (default) */
    const char *         reasoning_end;     /* text that closes it (e.g. "</think>"); NULL or "": none (default) */
    int32_t              reasoning_budget;  /* >= 0: tokens the output may write inside a block, after which
                                               reasoning_budget_message and reasoning_end are forced, one token a
                                               step; -1: no limit (default). Needs both markers */
    const char *         reasoning_budget_message; /* forced before reasoning_end; NULL or "": none (default) */
    const char *         reasoning_prefix;  /* text read before the output, as if written (a chat template's
                                               generation prompt, which may open a block); NULL or "": none */
} specdec_generate_params;

SPECDEC_API specdec_generate_params specdec_generate_default_params(void);

/* Checks the logit shaping that `params` asks for (logit biases, penalties, and the grammar with its
 * triggers and prefix, which it parses) against `vocab`, on the calling thread, as specdec_generate and
 * specdec_engine_add would: a server checks a request here before handing it to the thread that decodes,
 * which then parses an accepted grammar again. Both pointers are borrowed for the call; neither may be
 * NULL. Returns OK or INVALID_ARGUMENT (a NULL pointer too; specdec_last_error() says which field and
 * why). */
SPECDEC_API specdec_status specdec_logit_shaping_validate(const struct llama_vocab * vocab, const specdec_generate_params * params);

typedef enum specdec_stop_reason {
    SPECDEC_STOP_INVALID  = -1, /* not a stop: what the getter returns for a NULL generation or index out of range */
    SPECDEC_STOP_BUDGET   = 0, /* n_predict tokens generated */
    SPECDEC_STOP_EOG      = 1, /* an end-of-generation token (not part of the output) */
    SPECDEC_STOP_STRING   = 2, /* a stop string appeared: the tokens end with the token that completed it,
                                  the text ends right before it */
    SPECDEC_STOP_CONTEXT  = 3, /* the target context has no position left for this sequence */
    SPECDEC_STOP_CALLBACK = 4, /* the token callback returned false */
    SPECDEC_STOP_ERROR    = 5, /* the call failed while this sequence ran (specdec_generate's status says
                                  why); its tokens and text are those emitted until then */
    SPECDEC_STOP_CANCELLED = 6, /* an engine request was cancelled; its tokens and text are those emitted until then */
    SPECDEC_STOP_MAX_ENUM = 0x7FFFFFFF /* not a stop reason: makes any int a defined value */
} specdec_stop_reason;

/* Per-sequence counters. */
typedef struct specdec_sequence_stats {
    uint64_t n_generated;                       /* tokens in the output */
    uint64_t n_steps;                           /* target decodes that chose tokens: the prompt's, then one per step */
    uint64_t n_drafted;                         /* tokens proposed for verification */
    uint64_t n_accepted;                        /* proposed tokens the target kept */
    uint64_t n_proposed_at[SPECDEC_MAX_DRAFT];  /* [i]: proposals with a token at position i */
    uint64_t n_accepted_at[SPECDEC_MAX_DRAFT];  /* [i]: proposals whose token i was kept */
    uint64_t n_reached_at[SPECDEC_MAX_DRAFT];   /* [i]: proposals with a token at position i whose tokens before
                                                   it were all kept, so n_accepted_at[i] / n_reached_at[i] is the
                                                   acceptance at position i given the ones before it */
} specdec_sequence_stats;

/* Time of one generate call, in microseconds; bookkeeping is the rest. */
typedef struct specdec_generation_times {
    int64_t t_prefill_us; /* prompt decode and drafter prefill */
    int64_t t_verify_us;  /* target decodes of verification batches */
    int64_t t_draft_us;   /* drafting and the drafter's processing of verified batches */
    int64_t t_total_us;
} specdec_generation_times;

/*
 * Streams the text of each sequence as it is generated. Called once for
 * every emitted token, in order; return false to stop that sequence (no more
 * calls for it). `piece` holds the n_piece bytes of text this token releases
 * (not NUL-terminated, may contain NUL bytes, never NULL; valid during the
 * call). Text is held back, so a token's piece may be empty, or carry the
 * text of earlier tokens with its own:
 *  - while it could still be the start of a stop string (stop strings are
 *    never streamed, nor anything after them);
 *  - while it ends inside a multi-byte UTF-8 character.
 * When a sequence ends by its budget, its context or a stop string, the last
 * token's piece releases everything before the cut. When it ends by an
 * end-of-generation token with text still held, one more call passes token =
 * LLAMA_TOKEN_NULL and that text (its return value is ignored). At the end,
 * a trailing incomplete UTF-8 character is released as it is (the text keeps
 * those bytes too). So the pieces of a
 * sequence concatenate to its text (specdec_generation_text), except after the
 * callback stops it or the call fails: text held then is in the result only.
 */
typedef bool (*specdec_token_callback)(llama_seq_id seq_id, llama_token token, const char * piece, size_t n_piece,
                                       void * user_data);

typedef struct specdec_generation specdec_generation;

/*
 * Generates for n_prompts sequences at once (sequence i = prompt i, one target
 * batch verifies every sequence's proposal per step). Each prompt needs at
 * least one token; its sequence's memory is cleared first.
 *  - session: drafts and verifies through it; n_prompts <= its n_seq.
 *    NULL: plain decoding of `target` alone (the reference speculation must equal).
 *  - target: ignored when session is set (the session's target is used).
 *  - prompts[i]: n_prompt_tokens[i] tokens, at most SPECDEC_MAX_PROMPT_TOKENS;
 *    n_prompts at most SPECDEC_MAX_SEQ.
 *  - callback: optional (NULL); see specdec_token_callback.
 *  - *out: the results; free with specdec_generation_free. Set to NULL first.
 * Each sequence has the context's per-sequence positions (n_ctx_seq); with a
 * unified KV cache (kv_unified) the sequences of the call share what the
 * other sequences leave free equally, and a sequence that fills its share
 * stops with SPECDEC_STOP_CONTEXT.
 * Errors, before anything runs (*out stays NULL, nothing changed):
 * INVALID_ARGUMENT (NULL pointer, empty prompt, token outside the
 * vocabulary, bad parameter), PROMPT_TOO_LONG (a size above
 * SPECDEC_MAX_PROMPT_TOKENS), SEQ_CAPACITY (more prompts than sequences, or
 * than SPECDEC_MAX_SEQ), BATCH_CAPACITY,
 * CONTEXT_FULL (a prompt longer than its sequence's positions),
 * UNAVAILABLE (exact kernels on and several prompts on a unified KV cache:
 * see specdec_set_exact_kernels).
 * Errors while generating (a decode failed or was aborted by the context's
 * abort callback, the drafter failed, NaN logits): DECODE_FAILED,
 * CONTEXT_FULL, NATIVE_FAILURE, OUT_OF_MEMORY. Then *out still receives the
 * partial generation (free it too; only OUT_OF_MEMORY may leave it NULL):
 * each sequence's tokens and text emitted so far, which equal the start of
 * a run that did not fail, with stop reason SPECDEC_STOP_ERROR for those
 * that were still running. The session is left quiescent and every
 * sequence of the call is emptied: its positions are removed from the
 * target and draft contexts and from the session's history. The next call
 * works as if the failed one had not happened.
 */
SPECDEC_API specdec_status specdec_generate(
        specdec_session               * session,
        struct llama_context          * target,
        const llama_token * const     * prompts,
        const size_t                  * n_prompt_tokens,
        size_t                          n_prompts,
        const specdec_generate_params * params,
        specdec_token_callback          callback,
        void                          * user_data,
        specdec_generation           ** out);

/* NULL is a no-op. */
SPECDEC_API void specdec_generation_free(specdec_generation * generation);

/*
 * Results of a generation, valid until specdec_generation_free. Given a NULL
 * generation or a sequence index i outside [0, n_sequences), each getter
 * sets specdec_last_error() and returns the value its comment names.
 */

/* Sequences, one per prompt (at least 1); NULL: 0. */
SPECDEC_API size_t specdec_generation_n_sequences(const specdec_generation * generation);
/* Output tokens of sequence i and their number in *n_tokens (optional);
 * never NULL for a valid i, even with no tokens. Invalid: NULL and 0. With a
 * stop string, they end with the token that completed it (see the text). */
SPECDEC_API const llama_token * specdec_generation_tokens(const specdec_generation * generation, size_t i, size_t * n_tokens);
/* Output text of sequence i: the tokens' text, cut right before a stop
 * string; its length in bytes in *n_bytes (optional; the text may hold NUL
 * bytes), followed by a NUL. Not necessarily valid UTF-8 (a budget can end
 * inside a character). Invalid: NULL and 0. */
SPECDEC_API const char * specdec_generation_text(const specdec_generation * generation, size_t i, size_t * n_bytes);
/* With n_top_logprobs >= 0: the log-probability of each output token of
 * sequence i (one per token of specdec_generation_tokens), their number in
 * *n (optional). Not asked for, or invalid: NULL and 0. */
SPECDEC_API const float * specdec_generation_logprobs(const specdec_generation * generation, size_t i, size_t * n);
/* With n_top_logprobs >= 0: the n_top_logprobs most likely tokens at each
 * output position of sequence i, position after position (n_top_logprobs x
 * the tokens' count entries, in *n, optional). None, or invalid: NULL and 0. */
SPECDEC_API const specdec_token_logprob * specdec_generation_top_logprobs(const specdec_generation * generation, size_t i,
                                                                         size_t * n);
/* With prompt_logprobs: the log-probability of each prompt token of
 * sequence i but the first (n_prompt_tokens - 1 values, in *n, optional),
 * and n_top_logprobs alternatives at each of those positions (in *n_top,
 * optional). Not asked for, or invalid: NULL and 0. */
SPECDEC_API const float * specdec_generation_prompt_logprobs(const specdec_generation * generation, size_t i, size_t * n,
                                                             const specdec_token_logprob ** top, size_t * n_top);
/* Invalid: SPECDEC_STOP_INVALID. */
SPECDEC_API specdec_stop_reason specdec_generation_stop_reason(const specdec_generation * generation, size_t i);
/* Invalid: every field zero (n_steps 0 and n_generated 0, as after n_predict = 0; the error tells). */
SPECDEC_API specdec_sequence_stats specdec_generation_sequence_stats(const specdec_generation * generation, size_t i);
/* NULL: every field zero, t_total_us 0 among them (a real call takes longer). */
SPECDEC_API specdec_generation_times specdec_generation_get_times(const specdec_generation * generation);

/*
 * ---------------------------------------------------------------------------
 * Engine: continuous batching. Requests join and leave while it runs.
 * ---------------------------------------------------------------------------
 * An engine owns a set of sequence slots [0, n_seq) of a session (or of a
 * bare target context: plain decoding, the reference) and a bounded FIFO of
 * waiting requests. Each step:
 *  - cancelled requests leave;
 *  - waiting requests take free slots, in arrival order (the n requests of
 *    one specdec_engine_add_n together, when n slots are free). With reuse_prompts
 *    each takes the free slot whose positions share the longest prefix with
 *    its prompt, where that prefix is more than a tenth of the prompt (as
 *    llama-server's default --slot-prompt-similarity); else a slot next to
 *    a held one (any, when none is held), among those an empty one, else
 *    the lowest. It keeps that prefix and decodes only the rest; otherwise
 *    the lowest free slot, whose memory is cleared. A target whose memory cannot be cut back to any
 *    position (recurrent or hybrid models, sliding-window attention) keeps
 *    either everything the slot holds, when the prompt continues all of it,
 *    or the state recorded where one of the slot's last 4 prompts ended, or
 *    nothing;
 *  - without keep_finished, the held slots are then made one run of
 *    consecutive slots with the fewest moves (see
 *    specdec_session_move_sequence): of the runs as long as the requests
 *    held, the lowest that holds the most of them stays, and each request
 *    outside it moves into one of its free slots, whose positions go to the
 *    prompt cache first (reuse_prompts). Each verification batch then costs
 *    one forward pass per group of equal draft lengths, not one per gap; it
 *    moves only where that helps and is possible: a KV stream per sequence
 *    (no kv_unified) and a drafter that moves
 *    (specdec_session_can_move_sequences; plain decoding always);
 *  - prompts are decoded, at most n_prefill_chunk tokens per request per
 *    step, so a long prompt does not hold back the others' next token; a
 *    request whose prompt is read to the end emits its first token from the
 *    last row's logits right away (time to first token: a prefill, as
 *    without speculation);
 *  - every request past its prompt drafts and is verified in one target
 *    batch, then emits its tokens;
 *  - finished requests leave, and their slots are free for the next step.
 * A request's output equals what specdec_generate gives its prompt alone
 * with the same parameters (greedy or seeded), whatever else runs beside it
 * and whatever prefix it reused, as long as the kernels are exact
 * (specdec_set_exact_kernels, the default): every row's logits are then
 * independent of the batch it was computed in. With llama.cpp's own kernels
 * the same position decoded in a batch of another size can differ in the
 * last bits, which may change a draw between two almost equally likely
 * tokens (the lossless guarantee, that each token is what the target's
 * logits in that batch give, always holds).
 *
 * Threads: specdec_engine_cancel and specdec_engine_pause may be called from any thread at any time
 * while the engine lives. Every other engine function, and the callback,
 * run on one thread at a time (the engine's); add may also be called from
 * inside the callback, step and run_until_idle may not.
 */

typedef uint64_t specdec_request_id; /* issued by an engine, from 1 up; 0 is never a request */

typedef struct specdec_engine_params {
    uint32_t n_seq;           /* sequence slots [0, n_seq) the engine uses (sequences above are left alone);
                                 0 = every sequence of the session (plain: llama_n_seq_max); default 0 */
    uint32_t max_waiting;     /* requests waiting for a slot at most, >= 1 (requests added between steps that the
                                 next step puts into free slots do not count); add beyond: QUEUE_FULL; default 64 */
    int32_t  n_prefill_chunk; /* prompt tokens decoded per request per step, >= 0; 0 = the whole prompt in the
                                 step that admits it (in batches of n_batch); default 256 */
    bool     keep_finished;   /* true: a finished request's positions stay in the contexts until its slot is
                                 taken again (what specdec_generate does, so they can be read or captured);
                                 false: they are removed as it leaves; default false */
    bool     reuse_prompts;   /* true: finished requests' positions stay (as keep_finished) and a new request
                                 reuses the prefix a free slot holds (see above; the event's
                                 n_prompt_cached says how much); false: every prompt is decoded whole;
                                 default true */
    uint64_t prompt_cache_bytes; /* with reuse_prompts: host memory for the prompt cache, in bytes. When a
                                 prompt takes a slot and keeps less than half of what it holds, the slot's
                                 whole state (both contexts, the drafter's, the restore points) is saved
                                 first; a later prompt that shares more with a saved state than with any
                                 free slot (and more than a tenth of itself) has it loaded into its slot
                                 instead of decoded: into any slot where the drafter's state can move
                                 (specdec_session_can_move_sequences), else only into the slot it was
                                 saved from. The least recently saved go first when the saved
                                 states and the slots' restore points would exceed it; UINT64_MAX: no
                                 bound; 0: no cache; default 0 */
} specdec_engine_params;

SPECDEC_API specdec_engine_params specdec_engine_default_params(void);

/* Time of one request, in microseconds of the steady clock, from its add. */
typedef struct specdec_request_times {
    int64_t t_first_token_us; /* until its first emitted token; -1: none was emitted */
    int64_t t_total_us;       /* until it finished */
} specdec_request_times;

typedef enum specdec_engine_event_type {
    SPECDEC_ENGINE_EVENT_TOKEN    = 0, /* a request emitted a token */
    SPECDEC_ENGINE_EVENT_FINISHED = 1, /* a request left the engine; its result is in the event */
    SPECDEC_ENGINE_EVENT_MAX_ENUM = 0x7FFFFFFF
} specdec_engine_event_type;

/*
 * One event; every pointer is valid during the callback only. TOKEN events
 * of a request come in order, one per emitted token, with the text it
 * releases held back exactly as specdec_token_callback says (token =
 * LLAMA_TOKEN_NULL for the rest held after an end-of-generation token).
 * Every request added gets exactly one FINISHED event, last, in the step it
 * ends (a request cancelled while waiting: in the next step).
 */
typedef struct specdec_engine_event {
    specdec_engine_event_type type;
    specdec_request_id        id;
    llama_seq_id              seq_id;   /* its slot at this event (it may move down between steps);
                                           -1 when it never had one (cancelled while waiting) */
    /* TOKEN */
    llama_token               token;
    const char *              piece;    /* n_piece bytes, not NUL-terminated; never NULL */
    size_t                    n_piece;
    const specdec_token_logprob * logprob; /* with n_top_logprobs >= 0: the token and its log-probability;
                                              else NULL (and for the LLAMA_TOKEN_NULL event) */
    /* TOKEN: the n_top_logprobs most likely tokens at its position. FINISHED: those of every output
     * token, position after position. NULL and 0 when not asked for. */
    const specdec_token_logprob * top_logprobs;
    size_t                    n_top_logprobs;
    /* FINISHED */
    size_t                    n_prompt_cached; /* prompt tokens taken from the slot's memory, not decoded (reuse_prompts) */
    specdec_stop_reason       stop;
    specdec_sequence_stats    stats;
    specdec_request_times     times;
    const llama_token *       tokens;   /* n_tokens output tokens (as specdec_generation_tokens); never NULL */
    size_t                    n_tokens;
    const char *              text;     /* n_text bytes of output text, NUL-terminated (as specdec_generation_text) */
    size_t                    n_text;
    const float *             logprobs; /* with n_top_logprobs >= 0: n_tokens log-probabilities, one per output
                                           token (as specdec_generation_logprobs); else NULL */
    const float *             prompt_logprobs;     /* with prompt_logprobs: as specdec_generation_prompt_logprobs */
    size_t                    n_prompt_logprobs;
    const specdec_token_logprob * prompt_top_logprobs;
    size_t                    n_prompt_top_logprobs;
} specdec_engine_event;

/* Called on the engine's thread during step. For a TOKEN event, return false
 * to stop that request at once (SPECDEC_STOP_CALLBACK); for FINISHED the
 * return value is ignored. */
typedef bool (*specdec_engine_callback)(const specdec_engine_event * event, void * user_data);

typedef struct specdec_engine specdec_engine;

/*
 * Creates an engine over `session` (speculative), or, with session NULL,
 * over `target` alone (plain decoding). Both are borrowed: they must outlive
 * the engine, and nothing else may decode on its slots while it lives.
 * callback: optional (NULL: results are lost; use it). *out: set to NULL first.
 * Errors: INVALID_ARGUMENT (NULL pointer, n_prefill_chunk < 0, max_waiting 0), SEQ_CAPACITY
 * (n_seq above the session's n_seq or SPECDEC_MAX_SEQ), BATCH_CAPACITY
 * (n_seq above the target's n_batch), UNAVAILABLE (exact kernels on and
 * n_seq > 1 on a unified KV cache: see specdec_set_exact_kernels).
 */
SPECDEC_API specdec_status specdec_engine_init(specdec_session * session, struct llama_context * target,
                                               const specdec_engine_params * params, specdec_engine_callback callback,
                                               void * user_data, specdec_engine ** out);

/* NULL is a no-op. Requests still in it end without events. */
SPECDEC_API void specdec_engine_free(specdec_engine * engine);

/*
 * Queues a request (copies the prompt and the stop strings; nothing runs
 * until the next step). params: the generation parameters of this request
 * alone; its seed is used as given (specdec_generate's sequence i uses seed + i).
 * *id receives its id. Errors, nothing queued: INVALID_ARGUMENT (as
 * specdec_generate's for one prompt), PROMPT_TOO_LONG, CONTEXT_FULL (longer
 * than a slot's positions), QUEUE_FULL (max_waiting requests wait already beyond the free slots).
 */
SPECDEC_API specdec_status specdec_engine_add(specdec_engine * engine, const llama_token * prompt, size_t n_prompt,
                                              const specdec_generate_params * params, specdec_request_id * id);

/*
 * Queues n requests with one prompt (n completions of it, as OpenAI's `n`),
 * whose prompt is decoded once. Request i (0 <= i < n) has the id
 * *first_id + i and generates with `params` but the seed params->seed + i
 * (as specdec_generate's sequence i), so greedy choices are equal and
 * seeded ones differ, each reproducibly; otherwise each is an ordinary
 * request (its own events, stop, cancel). They wait for n free slots
 * together and are admitted in one step: the first decodes the prompt (or
 * reuses a prefix, as any request), and when it is read to the end the
 * others take a copy of its slot (specdec_session_copy_sequence; plain
 * decoding: the target's cells) and draw their first token from the same
 * logits; their FINISHED events say n_prompt_cached = n_prompt. Where the
 * drafter cannot copy (specdec_session_can_move_sequences false), or
 * prompt_logprobs is asked for, or the first is cancelled before its prompt
 * is read, each decodes the prompt itself: the output is the same, the
 * prompt's cost is n times. n = 1 is specdec_engine_add. The prompt and
 * params are borrowed for the call (copied, as by specdec_engine_add); the
 * n requests count n against max_waiting.
 * Errors, nothing queued: those of specdec_engine_add, and INVALID_ARGUMENT
 * for n == 0 or n above the engine's slots (the message names n).
 */
SPECDEC_API specdec_status specdec_engine_add_n(specdec_engine * engine, const llama_token * prompt, size_t n_prompt,
                                                const specdec_generate_params * params, uint32_t n,
                                                specdec_request_id * first_id);

/*
 * Asks request `id` to stop; any thread. It ends at the start of the next
 * step with SPECDEC_STOP_CANCELLED, keeping what it emitted, and its slot is
 * free for a waiting request in that same step. OK also for a request that
 * has already finished (nothing happens). UNKNOWN_REQUEST: never issued here.
 */
SPECDEC_API specdec_status specdec_engine_cancel(specdec_engine * engine, specdec_request_id id);

/*
 * Holds request `id` (paused = true) or lets it go on (false); any thread;
 * takes effect at the start of the next step, in the order asked. A paused
 * request keeps its slot, its positions and its place in the queue (a
 * waiting one still takes a slot when its turn comes), but nothing of it is
 * decoded, drafted or emitted until it goes on: its output is what it would
 * have been unpaused. For a reader that cannot keep up (a server's client
 * whose socket is full): the step's work goes to the others. OK also for a
 * request that has finished (nothing happens). UNKNOWN_REQUEST: never issued here.
 */
SPECDEC_API specdec_status specdec_engine_pause(specdec_engine * engine, specdec_request_id id, bool paused);

/*
 * Runs one step (see above); OK with nothing to do. When it fails (a decode
 * failed or was aborted, the drafter failed, NaN logits): every request in a
 * slot finishes with SPECDEC_STOP_ERROR (FINISHED events with their output
 * so far), every slot is emptied and the session left quiescent, waiting
 * requests stay queued, and the status says why; the engine stays usable.
 */
SPECDEC_API specdec_status specdec_engine_step(specdec_engine * engine);

/* Steps while specdec_engine_has_work; stops at the first failing step. */
SPECDEC_API specdec_status specdec_engine_run_until_idle(specdec_engine * engine);

/* Whether a step would do anything (NULL: false): a cancellation or pause to
 * apply, a request waiting while a slot is free, or a request in a slot that
 * is not paused. Paused requests alone (or waiting behind them) are no work:
 * run_until_idle returns with them still in the engine. */
SPECDEC_API bool specdec_engine_has_work(const specdec_engine * engine);

/*
 * ---------------------------------------------------------------------------
 * Model files: what a GGUF file is and what it can serve, from its metadata
 * alone (no weights are loaded, nothing is allocated for tensors).
 * ---------------------------------------------------------------------------
 */

#define SPECDEC_MAX_TARGET_LAYERS 16

typedef struct specdec_model_info {
    char     architecture[64];    /* general.architecture */
    char     name[128];           /* general.name; "" if missing */
    uint64_t file_size;           /* bytes */
    uint64_t n_params;            /* elements of all tensors */
    uint32_t n_tensors;
    uint32_t n_vocab;             /* tokenizer tokens; 0 for a "no_vocab" tokenizer */
    uint32_t n_embd;              /* <arch>.embedding_length */
    uint32_t n_layer;             /* <arch>.block_count (NextN blocks included), 1..512 */
    uint32_t n_layer_nextn;       /* NextN (MTP) blocks with their tensors present */
    uint32_t n_target_layers;     /* target layers an EAGLE-3 / DFlash draft reads */
    int32_t  target_layers[SPECDEC_MAX_TARGET_LAYERS];
    uint32_t target_hidden_size;  /* hidden width the draft was made for; 0 if none */
    uint32_t block_size;          /* DFlash block size; 0 if none */
    bool     dflash2;             /* DFlash draft with the DFlash2 selector */
    bool     markov_head;         /* DFlash draft with a DSpark Markov head */
    uint32_t strategies;          /* bit (1u << s) per specdec_strategy the file can take part in,
                                     as target (MTP, n-gram) or as draft (EAGLE3, DFLASH, DSPARK, DRAFT) */
} specdec_model_info;

/* Reads a GGUF file's metadata. Errors: INVALID_ARGUMENT, IO_ERROR (cannot
 * open), MALFORMED_FILE (not GGUF, truncated, inconsistent; or a file
 * llama.cpp v0.5.0 cannot load: a required key missing, such as
 * <arch>.block_count, <arch>.embedding_length or tokenizer.ggml.model, or a
 * value its loader asserts on; the message names the key). A file inspect
 * accepts loads with llama_model_load_from_file or fails with an error,
 * never an abort (docs/robustness.md lists the checks). */
SPECDEC_API specdec_status specdec_inspect(const char * path, specdec_model_info * out);

/* The same from bytes in memory (e.g. a file already read). */
SPECDEC_API specdec_status specdec_inspect_buffer(const void * data, size_t size, specdec_model_info * out);

/*
 * Whether the files at target_path and draft_path (NULL for MTP and n-gram)
 * can run `strategy` together, from metadata alone: OK, or the compatibility
 * status and a message saying why not (layer, width, vocabulary, missing
 * heads). The rules are the ones session creation applies to the loaded
 * models, so a pair this accepts is not refused later for its models (only
 * for its contexts). Plus the errors of specdec_inspect.
 */
SPECDEC_API specdec_status specdec_check_pair(const char * target_path, const char * draft_path, specdec_strategy strategy);

/*
 * Whether exact kernels (specdec_set_exact_kernels) make this build compute
 * the model at `path` batch-invariantly, from its tensor types alone: OK, or
 * UNAVAILABLE and a message naming the weight type or build option that is
 * not covered (a type the near-tie tier does not check, an AMX build, a
 * non-x86 build, a llama.cpp without the patches). Says nothing of whether
 * exact kernels are on now. Plus the errors of specdec_inspect.
 */
SPECDEC_API specdec_status specdec_check_exact(const char * path);

/*
 * Chooses the strategy for a target and an optional draft: the draft's
 * architecture (eagle3, dflash with or without a Markov head, any other
 * language model = DRAFT), else MTP when the target carries NextN heads.
 * MODEL_UNSUPPORTED when neither applies (use an n-gram strategy explicitly).
 */
SPECDEC_API specdec_status specdec_detect_strategy(const char * target_path, const char * draft_path, specdec_strategy * out);

/*
 * ---------------------------------------------------------------------------
 * Tokenizer: llama.cpp's, behind checks. In llama.cpp v0.5.0, llama_tokenize
 * throws a C++ exception through its C interface for a byte the vocabulary
 * has no token for, and llama_token_to_piece and llama_detokenize do for a
 * token id outside the vocabulary; called from C, Python (ctypes) or Rust
 * that ends the process. These check their arguments before llama.cpp runs
 * and catch whatever it throws. Thread-safe, as llama.cpp's tokenizer.
 *  - vocab: llama_model_get_vocab(model), borrowed for the call.
 *  - Output: each writes its result into the caller's buffer when it holds
 *    `capacity` elements or more, and sets the count (*n_tokens, *n_bytes)
 *    to the result's size either way. Buffer NULL with capacity 0 asks for
 *    the size alone (OK, nothing written). A smaller capacity:
 *    BUFFER_TOO_SMALL, the count set, the buffer untouched (the one failure
 *    that sets an output).
 * ---------------------------------------------------------------------------
 */

/*
 * Text to token ids (llama_tokenize).
 *  - text: n_text bytes, not NUL-terminated (a NUL byte is text); NULL only
 *    with n_text 0; at most INT32_MAX bytes.
 *  - add_special: add the BOS/EOS tokens the model is configured to add.
 *  - parse_special: read special tokens spelled in the text (such as "<s>")
 *    as those tokens; false: as plain text.
 *  - tokens, capacity, *n_tokens: see Output above (capacity in tokens).
 * Errors: INVALID_ARGUMENT (vocab or n_tokens NULL, text NULL with n_text >
 * 0, tokens NULL with capacity > 0, n_text above INT32_MAX), MODEL_UNSUPPORTED
 * (a vocabulary of type none, or one that adds a special token it lacks),
 * UNREPRESENTABLE_TEXT (a byte the vocabulary has no token for, not even a
 * byte token: the message names the first character it cannot tokenize
 * alone, and its byte offset), BUFFER_TOO_SMALL, OUT_OF_MEMORY.
 */
SPECDEC_API specdec_status specdec_tokenize(
        const struct llama_vocab * vocab,
        const char               * text,
        size_t                     n_text,
        bool                       add_special,
        bool                       parse_special,
        llama_token              * tokens,
        size_t                     capacity,
        size_t                   * n_tokens);

/*
 * Token ids to text (llama_detokenize): the pieces of the tokens, less the
 * space a tokenizer puts before the text (from the first token's piece), so
 * that the text of specdec_tokenize's tokens is that text again.
 *  - tokens: n_tokens ids, each in [0, llama_vocab_n_tokens); NULL only with
 *    n_tokens 0; at most INT32_MAX.
 *  - remove_special: drop a leading BOS and a trailing EOS where the model
 *    adds them.
 *  - unparse_special: write special tokens' text (such as "<s>"); false:
 *    they give no text.
 *  - text, capacity, *n_bytes: see Output above (capacity in bytes). The
 *    text is not NUL-terminated and may hold NUL bytes; it is not
 *    necessarily valid UTF-8 (a character can span tokens).
 * Errors: INVALID_ARGUMENT (vocab or n_bytes NULL, tokens NULL with n_tokens
 * > 0, text NULL with capacity > 0, a token outside the vocabulary: the
 * message names its index, n_tokens or the text above INT32_MAX),
 * BUFFER_TOO_SMALL, NATIVE_FAILURE, OUT_OF_MEMORY.
 */
SPECDEC_API specdec_status specdec_detokenize(
        const struct llama_vocab * vocab,
        const llama_token        * tokens,
        size_t                     n_tokens,
        bool                       remove_special,
        bool                       unparse_special,
        char                     * text,
        size_t                     capacity,
        size_t                   * n_bytes);

/*
 * The text of one token (llama_token_to_piece).
 *  - token: in [0, llama_vocab_n_tokens).
 *  - lstrip: leading spaces to skip, >= 0 (0: the whole piece).
 *  - special: write a special token's text (such as "<s>"); false: a
 *    special token gives no text.
 *  - piece, capacity, *n_bytes: see Output above (capacity in bytes; not
 *    NUL-terminated).
 * Errors: INVALID_ARGUMENT (vocab or n_bytes NULL, piece NULL with capacity
 * > 0, lstrip < 0, a token outside the vocabulary), BUFFER_TOO_SMALL,
 * NATIVE_FAILURE.
 */
SPECDEC_API specdec_status specdec_token_to_piece(
        const struct llama_vocab * vocab,
        llama_token                token,
        int32_t                    lstrip,
        bool                       special,
        char                     * piece,
        size_t                     capacity,
        size_t                   * n_bytes);

/*
 * ---------------------------------------------------------------------------
 * Devices
 * ---------------------------------------------------------------------------
 */

/*
 * Adds llama.cpp RPC servers (`ggml-rpc-server` processes) as ggml devices,
 * the way llama.cpp's --rpc does, so that models loaded afterwards can place
 * layers on them (llama_model_params.n_gpu_layers, .devices). `servers` is
 * "host:port[,host:port...]". Every endpoint is parsed and a TCP connection
 * to it is tried (5 s at most each) before any is added, because llama.cpp
 * aborts the process on an endpoint it cannot reach; on failure none is
 * added. Process-wide and not thread-safe: call it before loading models,
 * once per server.
 * Errors: INVALID_ARGUMENT (NULL, empty, not host:port, port outside
 * 1..65535), IO_ERROR (cannot resolve or connect), MODEL_UNSUPPORTED (built
 * without the RPC backend), NATIVE_FAILURE.
 * llama.cpp v0.5.0 still aborts the process when a server accepts the
 * connection but does not speak its RPC protocol, and when a server is lost
 * while a model is on it (see docs/robustness.md).
 */
SPECDEC_API specdec_status specdec_rpc_add_servers(const char * servers);

#ifdef __cplusplus
}
#endif

#endif /* SPECDEC_H */
