// Runs before every test file (vitest setupFiles). Its afterAll is registered first, so it runs after the
// file's own afterAll hooks (which stop the servers): the data dirs the file made go with it.
import { afterAll } from "vitest";
import { removeTempDataDirs } from "./svc-process.js";

afterAll(removeTempDataDirs);
