// The Messages API's names for the fields the pipeline and the engine name in errors (server/http/errors.ts).
import type { WireParams } from "../../http/errors.js";

export const MESSAGES_PARAMS: WireParams = {
  messages: "messages",
  output_schema: "output_config.format.schema",
  "tools[i].schema": "tools[i].input_schema",
};
