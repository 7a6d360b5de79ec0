// The copy-paste examples on the server page. The UI tests run each one exactly as the page shows it.

export interface Snippet {
  id: string;
  title: string;
  language: "bash" | "javascript" | "python";
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
      title: "JavaScript: OpenAI SDK",
      language: "javascript",
      run: "npm install openai, save as hello.mjs, run: node hello.mjs (with SVC_API_KEY set)",
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
      title: "JavaScript: Anthropic SDK",
      language: "javascript",
      run: "npm install @anthropic-ai/sdk, save as hello.mjs, run: node hello.mjs (with SVC_API_KEY set)",
      code: `import Anthropic from "@anthropic-ai/sdk";

const client = new Anthropic({ baseURL: "${anthropicBaseUrl}", apiKey: process.env.SVC_API_KEY });
const message = await client.messages.create({
  model: "svc",
  max_tokens: 256,
  messages: [{ role: "user", content: "Say hello." }],
});
console.log(message.content.filter((block) => block.type === "text").map((block) => block.text).join(""));`,
    },
    {
      id: "openai-python",
      title: "Python: OpenAI SDK",
      language: "python",
      run: "pip install openai, save as hello.py, run: python hello.py (with SVC_API_KEY set)",
      code: `import os
from openai import OpenAI

client = OpenAI(base_url="${openaiBaseUrl}", api_key=os.environ["SVC_API_KEY"])
completion = client.chat.completions.create(
    model="svc",
    messages=[{"role": "user", "content": "Say hello."}],
)
print(completion.choices[0].message.content)`,
    },
    {
      id: "anthropic-python",
      title: "Python: Anthropic SDK",
      language: "python",
      run: "pip install anthropic, save as hello.py, run: python hello.py (with SVC_API_KEY set)",
      code: `import os
from anthropic import Anthropic

client = Anthropic(base_url="${anthropicBaseUrl}", api_key=os.environ["SVC_API_KEY"])
message = client.messages.create(
    model="svc",
    max_tokens=256,
    messages=[{"role": "user", "content": "Say hello."}],
)
print("".join(block.text for block in message.content if block.type == "text"))`,
    },
    {
      id: "python-stdlib",
      title: "Python: no packages",
      language: "python",
      run: "Any Python 3: save as hello.py, run: python3 hello.py (with SVC_API_KEY set)",
      code: `import json, os, urllib.request

request = urllib.request.Request(
    "${openaiBaseUrl}/chat/completions",
    data=json.dumps({"model": "svc", "messages": [{"role": "user", "content": "Say hello."}]}).encode(),
    headers={"Authorization": "Bearer " + os.environ["SVC_API_KEY"], "Content-Type": "application/json"},
)
with urllib.request.urlopen(request) as response:
    print(json.load(response)["choices"][0]["message"]["content"])`,
    },
  ];
}
