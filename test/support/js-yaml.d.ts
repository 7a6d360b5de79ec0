// js-yaml (electron-builder's own YAML parser, in node_modules through it) ships no types; the tests need only load.
declare module "js-yaml" {
  export function load(input: string): unknown;
}
