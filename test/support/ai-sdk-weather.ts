// The forced tool call the AI SDK provider tests share (Chat, Responses, Messages): a weather tool whose result
// goes back, forced on the first step and refused after it, so every provider runs exactly two steps.
import { jsonSchema, stepCountIs, tool, type PrepareStepFunction, type ToolSet } from "ai";

export const CITY_SCHEMA = { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false } as const;
export const WEATHER = { temp: 21, sky: "clear" };

/** generateText's options for the weather call; `calls` collects the inputs the tool was called with. */
export function forcedWeatherCall(calls: unknown[]): { prompt: string; tools: ToolSet; prepareStep: PrepareStepFunction<ToolSet>; stopWhen: ReturnType<typeof stepCountIs> } {
  return {
    prompt: "Weather in Oslo?",
    tools: {
      get_weather: tool({
        description: "Weather for a city",
        inputSchema: jsonSchema<{ city: string }>(CITY_SCHEMA),
        execute: async (input) => {
          calls.push(input);
          return WEATHER;
        },
      }),
    },
    prepareStep: ({ stepNumber }) => (stepNumber === 0 ? { toolChoice: { type: "tool", toolName: "get_weather" } } : { toolChoice: "none" }),
    stopWhen: stepCountIs(3),
  };
}
