// What routes need from the rest of the server.
import type { EngineHost } from "../engine/engine-host.js";
import type { FilesService } from "../features/files/files-service.js";
import type { KeysService, Principal } from "../features/keys/keys-service.js";
import type { InferencePipeline } from "../pipeline/pipeline.js";

export interface ServerDeps {
  pipeline: InferencePipeline;
  keys: KeysService;
  engineHost: EngineHost;
  files: FilesService;
  version: string;
}

declare module "fastify" {
  interface FastifyRequest {
    principal: Principal | null;
  }
}
