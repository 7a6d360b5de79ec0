// The copy-paste examples on the server page. The UI tests run each one exactly as the page shows it.

export interface Snippet {
  id: string;
  title: string;
  language: "bash" | "javascript";
  /** How to run it, shown under the code. */
  run: string;
  code: string;
}

export function buildSnippets(openaiBaseUrl: string, anthropicBaseUrl: string): Snippet[] {
  return [
    {
      id: "curl-chat",
      title: "curl: Chat Completions",
      language: "bash",
      run: "Paste into a shell with SVC_API_KEY set.",
      code: `curl ${openaiBaseUrl}/chat/completions \\
  -H "Authorization: Bearer $SVC_API_KEY" \\
  -H "Content-Type: application/json" \\
  -d '{"model": "svc", "messages": [{"role": "user", "content": "Say hello."}]}'`,
    },
    {
      id: "curl-messages",
      title: "curl: Messages",
      language: "bash",
      run: "Paste into a shell with SVC_API_KEY set.",
      code: `curl ${anthropicBaseUrl}/v1/messages \\
  -H "x-api-key: $SVC_API_KEY" \\
  -H "anthropic-version: 2023-06-01" \\
  -H "Content-Type: application/json" \\
  -d '{"model": "svc", "max_tokens": 256, "messages": [{"role": "user", "content": "Say hello."}]}'`,
    },
    {
      id: "openai-node",
      title: "OpenAI SDK (Node.js)",
      language: "javascript",
      run: "npm install openai, save as hello.mjs, run: SVC_API_KEY=… node hello.mjs",
      code: `import OpenAI from "openai";

const client = new OpenAI({ baseURL: "${openaiBaseUrl}", apiKey: process.env.SVC_API_KEY });
const completion = await client.chat.completions.create({
  model: "svc",
  messages: [{ role: "user", content: "Say hello." }],
});
console.log(completion.choices[0].message.content);`,
    },
    {
      id: "anthropic-node",
      title: "Anthropic SDK (Node.js)",
      language: "javascript",
      run: "npm install @anthropic-ai/sdk, save as hello.mjs, run: SVC_API_KEY=… node hello.mjs",
      code: `import Anthropic from "@anthropic-ai/sdk";

const client = new Anthropic({ baseURL: "${anthropicBaseUrl}", apiKey: process.env.SVC_API_KEY });
const message = await client.messages.create({
  model: "svc",
  max_tokens: 256,
  messages: [{ role: "user", content: "Say hello." }],
});
console.log(message.content.filter((block) => block.type === "text").map((block) => block.text).join(""));`,
    },
  ];
}
