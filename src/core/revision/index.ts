/** Canonical revisions (DESIGN §2.6–2.8): projection, identity, storage, record, rollback, history. */
export * from "./canonical.ts";
export * from "./format.ts";
export * from "./projection.ts";
export * from "./hash.ts";
export * from "./controller-revision.ts";
export * from "./record.ts";
export * from "./apply.ts";
export * from "./history.ts";
