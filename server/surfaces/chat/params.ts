// Chat Completions' names for the fields the pipeline and the engine name in errors (server/http/errors.ts).
import type { WireParams } from "../../http/errors.js";

export const CHAT_PARAMS: WireParams = {
  messages: "messages",
  output_schema: "response_format.json_schema.schema",
  "tools[i].schema": "tools[i].function.parameters",
};
