export * from "./schema.ts";
export * from "./problems.ts";
export * from "./parse.ts";
export * from "./route.ts";
