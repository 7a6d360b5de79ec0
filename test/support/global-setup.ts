// Generates the tiny test model once per run and tells the tests where it is.
import type { TestProject } from "vitest/node";
import { writeTinyModel } from "../../resources/test-model/cli.js";

declare module "vitest" {
  export interface ProvidedContext {
    tinyModelPath: string;
  }
}

export default function setup(project: TestProject): void {
  project.provide("tinyModelPath", writeTinyModel());
}
