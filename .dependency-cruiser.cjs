// The layer rules (docs/architecture.md, "Layers"), checked on every test run (`npm run lint:layers`): a layer
// crossed fails CI the way a type error does. Tests and benchmarks may reach across layers; product code may not.
// The server's imports point one way:
//   composition root (server/*.ts) → features → surfaces → http → pipeline → engine | store | ingest → core
// A layer may import any layer to its right, never one to its left; nothing imports the composition root
// but the processes that start the server (main/, tests, benchmarks); and no module imports itself round a circle.
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: "node-llama-cpp-only-in-engine",
      comment: "server/engine is the only importer of node-llama-cpp.",
      severity: "error",
      from: { path: "^(server|main|renderer)/", pathNot: "^server/engine/" },
      to: { path: "node_modules/node-llama-cpp/" },
    },
    {
      name: "better-sqlite3-only-in-store",
      comment: "server/store is the only importer of better-sqlite3.",
      severity: "error",
      from: { path: "^(server|main|renderer)/", pathNot: "^server/store/" },
      to: { path: "node_modules/better-sqlite3/" },
    },
    {
      name: "electron-only-in-main",
      comment: "main/ is the only importer of electron.",
      severity: "error",
      from: { path: "^(server|renderer)/" },
      to: { path: "node_modules/electron/" },
    },
    {
      name: "core-imports-nothing",
      comment: "server/core holds canonical types, errors and ids: it imports nothing of the server.",
      severity: "error",
      from: { path: "^server/core/" },
      to: { path: "^(server|main|renderer)/", pathNot: "^server/core/" },
    },
    {
      name: "no-circular",
      comment: "No module reaches itself through its imports (types included): a circle has no layer order.",
      severity: "error",
      from: { path: "^(server|main|renderer)/" },
      to: { circular: true },
    },
    {
      name: "nothing-imports-the-composition-root",
      comment: "server/*.ts (index, app, cli, config) wire the layers together; no layer imports them (main/ starts the server).",
      severity: "error",
      from: { path: "^server/[^/]+/" },
      to: { path: "^server/[^/]+\\.ts$" },
    },
    {
      name: "features-above-surfaces",
      comment: "server/features may import surfaces, http, pipeline, engine, store, ingest and core; nothing imports a feature but the composition root and other features.",
      severity: "error",
      from: { path: "^server/(surfaces|http|pipeline|engine|store|ingest|core)/" },
      to: { path: "^server/features/" },
    },
    {
      name: "surfaces-above-http",
      comment: "server/surfaces (the wire codecs) may import http and below; http, the pipeline and below never import a surface.",
      severity: "error",
      from: { path: "^server/(http|pipeline|engine|store|ingest|core)/" },
      to: { path: "^server/surfaces/" },
    },
    {
      name: "http-above-pipeline",
      comment: "server/http (transport, auth, error bodies, streaming) may import the pipeline and below; the pipeline and below never import http.",
      severity: "error",
      from: { path: "^server/(pipeline|engine|store|ingest|core)/" },
      to: { path: "^server/http/" },
    },
    {
      name: "pipeline-above-engine-store-ingest",
      comment: "server/pipeline may import the engine, the store, ingest and core; those never import the pipeline.",
      severity: "error",
      from: { path: "^server/(engine|store|ingest|core)/" },
      to: { path: "^server/pipeline/" },
    },
    {
      name: "features-reach-the-engine-through-its-host",
      comment: "Features load models and ask for the GPU through EngineHost (server/engine/engine-host.ts), never the concrete engine's module.",
      severity: "error",
      from: { path: "^server/features/" },
      to: { path: "^server/engine/llama-(engine|runtime)\\.ts$" },
    },
    {
      name: "surfaces-never-import-each-other",
      comment: "Each surface (server/surfaces/<surface>/) is a codec of its own; shared helpers live in server/surfaces/*.ts.",
      severity: "error",
      from: { path: "^server/surfaces/([^/]+)/" },
      to: { path: "^server/surfaces/([^/]+)/", pathNot: "^server/surfaces/$1/" },
    },
    {
      name: "renderer-only-ipc-contract",
      comment: "The window imports only types from the IPC contract and the wire types (and the shared size format and upstream address check); it talks to the API over HTTP like any client.",
      severity: "error",
      from: { path: "^renderer/" },
      // server/core/format.ts is the one size format the CLI and the window share, server/core/upstream-url.ts
      // the one check of an upstream engine's address the server and the window's form share: pure, importing nothing.
      to: { path: "^(server|main)/", pathNot: "^server/(features/console/(contract|wire)|core/(format|upstream-url))\\.ts$" },
    },
    {
      name: "renderer-contract-types-only",
      comment: "The contract and the wire types reach the renderer as types only (no server code in the bundle).",
      severity: "error",
      from: { path: "^renderer/" },
      to: { path: "^server/features/console/(contract|wire)\\.ts$", dependencyTypesNot: ["type-only"] },
    },
    {
      name: "wire-types-import-nothing",
      comment: "The wire types are the renderer's view of the API's JSON: a module of types that imports nothing.",
      severity: "error",
      from: { path: "^server/features/console/wire\\.ts$" },
      to: { path: "^(server|main|renderer)/|node_modules/" },
    },
    {
      name: "server-never-imports-main-or-renderer",
      comment: "The server runs without Electron and without the window.",
      severity: "error",
      from: { path: "^server/" },
      to: { path: "^(main|renderer)/" },
    },
    {
      name: "no-native-modules-in-renderer",
      comment: "node-llama-cpp, better-sqlite3 and sharp stay out of the renderer bundle.",
      severity: "error",
      from: { path: "^renderer/" },
      to: { path: "node_modules/(node-llama-cpp|better-sqlite3|sharp)/" },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "^(dist|node_modules|test|bench|resources|scripts)/" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.base.json" },
    enhancedResolveOptions: { exportsFields: ["exports"], conditionNames: ["import", "require", "node", "default", "types"], extensions: [".ts", ".tsx", ".js", ".mjs", ".cjs", ".json"] },
    moduleSystems: ["es6", "cjs"],
  },
};
