// What the window never says (issue 41, item 1): a command of the CLI, one of its flags, or an environment
// variable that sets one (SVC_API_KEY is the Server page's examples' own). window-words.test.ts scans every
// page and the bundle with it; other UI tests check their own texts.
export const CLI_WORDS =
  /\bsvc (serve|keys|accounts|models|engine|help)\b|(^|[\s(`'"=])--(context-size|sequences|threads|gpu|gpu-layers|model|port|host|lan|mmap|data-dir|force|speech|sha256|log-level|warm-start|warm-start-max-gb|upstream|upstream-key|upstream-affinity|speculation|draft-model|help)\b|\bSVC_(?!API_KEY\b)[A-Z][A-Z_]*\b/;
