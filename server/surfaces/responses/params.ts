// The Responses API's names for the fields the pipeline and the engine name in errors (server/http/errors.ts).
import type { WireParams } from "../../http/errors.js";

export const RESPONSES_PARAMS: WireParams = {
  messages: "input",
  output_schema: "text.format.schema",
  "tools[i].schema": "tools[i].parameters",
};
