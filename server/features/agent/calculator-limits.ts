// The calculator's limits that the server's own process needs (the agent's tool schema): apart from
// calculator.ts, which loads math.js (about 0.9 s of every server start) and runs only in the calculator's
// process.

/** Characters of one expression. */
export const MAX_EXPRESSION_CHARS = 500;
