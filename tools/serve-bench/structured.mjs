// The serving benchmark's structured-output workload: single-turn streamed
// greedy completions whose output a grammar constrains, as applications
// that need JSON send them. Each prompt carries its constraint in the
// fields both servers take on /v1/completions: llama.cpp's `json_schema`
// (a JSON schema, turned into a grammar by llama.cpp's converter in both;
// specdec also takes OpenAI's response_format, which llama-server reads on
// chat completions only) or `grammar` (GBNF). The target picks the most
// likely token the grammar allows, so a drafted token the grammar forbids
// is rejected like any disagreement, and answers end when the grammar does
// (often before max_tokens).

export const STRUCTURED_PROMPTS = [
    'Return the user record as JSON: name, age and a list of tags.',
    'Extract the order as JSON with an id, the items with their quantities, and whether it is paid.',
    'Answer with any JSON object that describes the weather today.',
    'List three colours, each as a dash and a word.',
];

const SCHEMAS = [
    {
        type: 'object',
        properties: { name: { type: 'string' }, age: { type: 'integer' }, tags: { type: 'array', items: { type: 'string' } } },
        required: ['name', 'age', 'tags'],
    },
    {
        type: 'object',
        properties: {
            id: { type: 'integer' },
            items: { type: 'array', items: { type: 'object', properties: { sku: { type: 'string' }, quantity: { type: 'integer' } },
                                             required: ['sku', 'quantity'] } },
            paid: { type: 'boolean' },
        },
        required: ['id', 'items', 'paid'],
    },
    {}, // any object: what response_format json_object asks for
];

// Three items of "- word " (letters only; the fixtures' vocabularies have no newline), then the end.
const LIST_GRAMMAR = 'root ::= item item item\nitem ::= "- " [a-z]+ " "\n';

// The request fields that constrain prompt i's output.
export function structured_body(prompt_index) {
    return prompt_index < SCHEMAS.length ? { json_schema: SCHEMAS[prompt_index] } : { grammar: LIST_GRAMMAR };
}

// What each prompt is constrained by, for the report.
export const STRUCTURED_KINDS = ['JSON schema (object of a string, an integer, a list of strings)',
                                 'JSON schema (nested objects in a list, a boolean)',
                                 'any JSON object (`json_schema` {})',
                                 'GBNF grammar (three "- word" items)'];
