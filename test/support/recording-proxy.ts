// A loopback proxy between a coding agent (Claude Code, Codex CLI) and `svc serve` that records each
// exchange: the request body, the response body, and when its first byte and its first content event came.
// Tests read per-request usage from it (the agents' own summaries add requests up); the bench reads TTFT.
import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface Exchange {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  requestBody: string;
  status: number;
  responseBody: string;
  /** Milliseconds from the request's end to the first response byte (for a stream: the first event). */
  firstByteMs: number | null;
  /** Milliseconds to the first text, thinking or tool event of a stream (the first generated token). */
  firstTokenMs: number | null;
  totalMs: number;
}

/** The first event that carries generated output, in either wire format. */
const FIRST_TOKEN = /"type":"(content_block_delta|response\.output_text\.delta|response\.reasoning_summary_text\.delta|response\.function_call_arguments\.delta|response\.output_item\.done)"/;

export class RecordingProxy {
  readonly exchanges: Exchange[] = [];
  private server: Server | null = null;

  constructor(private readonly target: string) {}

  async start(): Promise<string> {
    const target = new URL(this.target);
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const requestBody = Buffer.concat(chunks);
        const started = Date.now();
        const exchange: Exchange = {
          method: req.method ?? "GET",
          path: req.url ?? "/",
          headers: req.headers,
          requestBody: requestBody.toString("utf8"),
          status: 0,
          responseBody: "",
          firstByteMs: null,
          firstTokenMs: null,
          totalMs: 0,
        };
        const upstream = httpRequest(
          { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: { ...req.headers, host: target.host } },
          (up) => {
            exchange.status = up.statusCode ?? 0;
            res.writeHead(up.statusCode ?? 502, up.headers);
            const body: Buffer[] = [];
            up.on("data", (c: Buffer) => {
              exchange.firstByteMs ??= Date.now() - started;
              body.push(c);
              if (exchange.firstTokenMs === null && FIRST_TOKEN.test(c.toString("utf8"))) exchange.firstTokenMs = Date.now() - started;
              res.write(c);
            });
            up.on("end", () => {
              exchange.responseBody = Buffer.concat(body).toString("utf8");
              exchange.totalMs = Date.now() - started;
              this.exchanges.push(exchange);
              res.end();
            });
          },
        );
        upstream.on("error", (err) => {
          res.writeHead(502, { "content-type": "text/plain" });
          res.end(String(err));
        });
        upstream.end(requestBody);
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, "127.0.0.1", resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Inference exchanges only (the agents also probe other endpoints). */
  inferences(): Exchange[] {
    return this.exchanges.filter((e) => e.method === "POST" && /^\/v1\/(messages|responses)(\?|$)/.test(e.path));
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

/** The prompt and cache read of a streamed exchange, from message_start (Messages) or response.completed (Responses). */
export function promptUsage(exchange: Exchange): { prompt: number; cached: number } | null {
  for (const line of exchange.responseBody.split("\n")) {
    if (!line.startsWith("data: ")) continue;
    const data = JSON.parse(line.slice(6)) as { type?: string; message?: { usage?: Record<string, number> }; response?: { usage?: any } };
    if (data.type === "message_start" && data.message?.usage) {
      const u = data.message.usage;
      return { prompt: u.input_tokens! + u.cache_read_input_tokens! + u.cache_creation_input_tokens!, cached: u.cache_read_input_tokens! };
    }
    if (data.type === "response.completed" && data.response?.usage)
      return { prompt: data.response.usage.input_tokens, cached: data.response.usage.input_tokens_details.cached_tokens };
  }
  return null;
}
