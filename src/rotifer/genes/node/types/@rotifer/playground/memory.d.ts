// Types of the Memory API for genes on Node.js, as in the specification
// ("The four calls"). Import them with
//   import type { GeneMemoryAccess } from "@rotifer/playground/memory";
// rotifer strips the types before running a gene; `MemoryError` also exists
// at run time: import { MemoryError } from "@rotifer/playground/memory".

export type MemoryCategory = "PREFERENCE" | "PATTERN" | "CONTEXT" | "CACHE";
export type AccessScope = "CREATOR_GENE_ONLY" | "SAME_DOMAIN" | "ALL_GENES" | "DEPLOYER_CONFIGURED";
export type SharePolicy = "PRIVATE" | "ANONYMIZED_SHARE" | "KNOWLEDGE_GENE";
export type MemoryErrorCode =
  | "MEMORY_NOT_FOUND"
  | "MEMORY_ACCESS_DENIED"
  | "MEMORY_QUOTA_EXCEEDED"
  | "MEMORY_INVALID_INPUT"
  | "MEMORY_STORAGE_ERROR";

export interface MemoryAccessPolicy {
  readScope: AccessScope;
  writeScope: AccessScope;
  sharePolicy: SharePolicy;
}

export interface RetentionPolicy {
  maxRetentionDays: number | null; // whole days, 1 to 2147483647; null for no limit
  autoDeleteOnTermination: boolean;
  anonymizationSupported: boolean;
}

export interface MemoryEntry {
  entryId: string;
  category: MemoryCategory;
  key: string;
  value: Uint8Array;
  createdBy: string;
  lastAccessedBy: string;
  createdAt: string; // RFC 3339, UTC
  updatedAt: string;
  accessPolicy: MemoryAccessPolicy;
  retentionPolicy: RetentionPolicy | null;
}

export interface MemoryFilter {
  category?: MemoryCategory;
  keyPrefix?: string; // plain prefix, not a pattern
  since?: string; // RFC 3339, inclusive, compared with updatedAt
  until?: string; // RFC 3339, exclusive, compared with updatedAt
  limit?: number; // default 100, at most 1000
}

export interface GeneMemoryAccess {
  readMemory(key: string, category?: MemoryCategory): MemoryEntry | null;
  writeMemory(
    key: string,
    value: Uint8Array,
    category: MemoryCategory,
    accessPolicy?: MemoryAccessPolicy,
    retentionPolicy?: RetentionPolicy | null,
  ): MemoryEntry;
  queryMemory(filter?: MemoryFilter): MemoryEntry[];
  deleteMemory(key: string): void;
}

export declare class MemoryError extends Error {
  readonly code: MemoryErrorCode;
  constructor(code: MemoryErrorCode, message: string);
}

export interface GeneContext {
  memory: GeneMemoryAccess;
  log(...parts: unknown[]): void;
  agent: string | null;
  gene: { name: string; domain: string; version: string; v2Id: string | null };
}
