/**
 * A small structural validator for Kubernetes CRD openAPIV3Schema (the subset Liqo's CRDs use):
 * type, properties, required, items, enum, additionalProperties, format (ipv4, cidr, int32,
 * int64, byte, date-time), minimum/maximum, minLength/maxLength, maxItems, pattern, nullable,
 * x-kubernetes-int-or-string, x-kubernetes-preserve-unknown-fields. CEL rules
 * (x-kubernetes-validations) are not evaluated.
 *
 * Unknown fields: `mode: 'strict'` reports them (catches typos in test fixtures);
 * `mode: 'prune'` deletes them in place, like the API server does for structural schemas.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { celTypeName, compileRule, type Rule } from './cel.js';
import { withLiqoCrdUpdates } from './crd-updates.js';

export interface JsonSchema {
  type?: 'object' | 'array' | 'string' | 'integer' | 'number' | 'boolean';
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
  enum?: unknown[];
  additionalProperties?: JsonSchema | boolean;
  format?: string;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  maxItems?: number;
  pattern?: string;
  nullable?: boolean;
  anyOf?: JsonSchema[];
  'x-kubernetes-int-or-string'?: boolean;
  'x-kubernetes-preserve-unknown-fields'?: boolean;
  'x-kubernetes-validations'?: { rule: string; message?: string }[];
  default?: unknown;
}

export interface CrdInfo {
  group: string;
  version: string;
  kind: string;
  listKind: string;
  plural: string;
  namespaced: boolean;
  statusSubresource: boolean;
  schema: JsonSchema;
}

/** Load every CRD (served versions) from a directory of YAML files, with Liqo's later changes (crd-updates.ts). */
export function loadCrds(dir: string): CrdInfo[] {
  const out: CrdInfo[] = [];
  for (const f of readdirSync(dir)
    .filter((n) => n.endsWith('.yaml'))
    .sort()) {
    for (const doc of parseAllDocuments(readFileSync(join(dir, f), 'utf8'))) {
      const crd = doc.toJS() as {
        kind?: string;
        spec: {
          group: string;
          scope: string;
          names: { kind: string; listKind: string; plural: string };
          versions: {
            name: string;
            served: boolean;
            schema: { openAPIV3Schema: JsonSchema };
            subresources?: { status?: object };
          }[];
        };
      } | null;
      if (crd?.kind !== 'CustomResourceDefinition') continue;
      for (const v of crd.spec.versions) {
        if (!v.served) continue;
        const info: CrdInfo = {
          group: crd.spec.group,
          version: v.name,
          kind: crd.spec.names.kind,
          listKind: crd.spec.names.listKind,
          plural: crd.spec.names.plural,
          namespaced: crd.spec.scope === 'Namespaced',
          statusSubresource: v.subresources?.status !== undefined,
          schema: v.schema.openAPIV3Schema,
        };
        out.push(withLiqoCrdUpdates(info));
      }
    }
  }
  return out;
}

const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;
const B64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

function formatOk(format: string, v: string): boolean {
  switch (format) {
    case 'ipv4':
      return IPV4.test(v);
    case 'cidr': {
      const [a, l, ...rest] = v.split('/');
      if (rest.length > 0 || a === undefined || l === undefined || !/^\d{1,3}$/.test(l)) return false;
      if (IPV4.test(a)) return Number(l) <= 32;
      return a.includes(':') && Number(l) <= 128;
    }
    case 'byte':
      return B64.test(v);
    case 'date-time':
      return DATE_TIME.test(v);
    default:
      return true;
  }
}

export type Mode = 'strict' | 'prune';

const compiled = new WeakMap<object, Rule[]>();
function rulesOf(schema: JsonSchema): Rule[] {
  let r = compiled.get(schema);
  if (r === undefined) {
    r = (schema['x-kubernetes-validations'] ?? []).map((v) => compileRule(v.rule));
    compiled.set(schema, r);
  }
  return r;
}

/**
 * The old object for transition rules (`self == oldSelf`): pass it on updates (`validate(new,
 * schema, mode, '', { old })`); object fields are matched by name, list items are not.
 */
export interface ValidateContext {
  old?: unknown;
  isUpdate?: boolean;
  /** 'prune' mode: the paths of the unknown fields dropped are appended here. */
  pruned?: string[];
}

/**
 * Validate `value` against `schema`; returns messages like `spec.remote.cidr.pod[0]: ...`.
 * 'prune' mode is the API server's: unknown fields dropped, `default`s filled in.
 * CEL rules give the server's text: `PATH: Invalid value: "object": MESSAGE`.
 */
export function validate(
  value: unknown,
  schema: JsonSchema,
  mode: Mode = 'strict',
  path = '',
  ctx: ValidateContext = {},
): string[] {
  const errs: string[] = [];
  const at = path === '' ? '(root)' : path;
  if (value !== null && value !== undefined) {
    const vs = schema['x-kubernetes-validations'] ?? [];
    rulesOf(schema).forEach((rule, i) => {
      if (!rule(value, ctx.old, ctx.isUpdate === true && ctx.old !== undefined))
        errs.push(`${at}: Invalid value: "${celTypeName(value)}": ${vs[i]!.message ?? `failed rule: ${vs[i]!.rule}`}`);
    });
  }
  if (value === null) {
    if (!schema.nullable) errs.push(`${at}: must not be null`);
    return errs;
  }
  if (schema['x-kubernetes-int-or-string']) {
    if (!(typeof value === 'string' || Number.isInteger(value))) errs.push(`${at}: expected integer or string`);
    return errs;
  }
  switch (schema.type) {
    case 'object': {
      if (typeof value !== 'object' || Array.isArray(value)) {
        errs.push(`${at}: expected object`);
        return errs;
      }
      const obj = value as Record<string, unknown>;
      const props = schema.properties;
      // The API server defaults before it validates: a required field with a default is never missing.
      if (mode === 'prune' && props !== undefined) {
        for (const [k, ps] of Object.entries(props))
          if (obj[k] === undefined && ps.default !== undefined) obj[k] = structuredClone(ps.default);
      }
      for (const r of schema.required ?? [])
        if (obj[r] === undefined) errs.push(`${path === '' ? r : `${path}.${r}`}: required`);
      const oldObj =
        ctx.old !== null && typeof ctx.old === 'object' && !Array.isArray(ctx.old)
          ? (ctx.old as Record<string, unknown>)
          : undefined;
      for (const [k, v] of Object.entries(obj)) {
        const sub = `${path === '' ? k : `${path}.${k}`}`;
        const ps = props?.[k];
        const subCtx: ValidateContext = {
          old: oldObj?.[k],
          isUpdate: ctx.isUpdate === true && oldObj !== undefined && k in oldObj,
          ...(ctx.pruned ? { pruned: ctx.pruned } : {}),
        };
        if (ps !== undefined) {
          errs.push(...validate(v, ps, mode, sub, subCtx));
          continue;
        }
        if (typeof schema.additionalProperties === 'object') {
          errs.push(...validate(v, schema.additionalProperties, mode, sub, subCtx));
          continue;
        }
        if (
          schema.additionalProperties === true ||
          schema['x-kubernetes-preserve-unknown-fields'] ||
          props === undefined
        )
          continue;
        if (mode === 'prune') {
          delete obj[k];
          ctx.pruned?.push(sub);
        } else errs.push(`${sub}: unknown field`);
      }
      break;
    }
    case 'array': {
      if (!Array.isArray(value)) {
        errs.push(`${at}: expected array`);
        return errs;
      }
      if (schema.maxItems !== undefined && value.length > schema.maxItems)
        errs.push(`${at}: more than ${schema.maxItems} items`);
      if (schema.items)
        value.forEach((v, i) =>
          errs.push(...validate(v, schema.items!, mode, `${path}[${i}]`, ctx.pruned ? { pruned: ctx.pruned } : {})),
        );
      break;
    }
    case 'string': {
      if (typeof value !== 'string') {
        errs.push(`${at}: expected string`);
        return errs;
      }
      if (schema.format !== undefined && !formatOk(schema.format, value))
        errs.push(`${at}: ${JSON.stringify(value)} is not a valid ${schema.format}`);
      if (schema.minLength !== undefined && value.length < schema.minLength)
        errs.push(`${at}: shorter than ${schema.minLength}`);
      if (schema.maxLength !== undefined && value.length > schema.maxLength)
        errs.push(`${at}: longer than ${schema.maxLength}`);
      if (schema.pattern !== undefined && !new RegExp(schema.pattern, 'u').test(value))
        errs.push(`${at}: does not match ${schema.pattern}`);
      break;
    }
    case 'integer':
    case 'number': {
      if (typeof value !== 'number' || (schema.type === 'integer' && !Number.isInteger(value))) {
        errs.push(`${at}: expected ${schema.type}`);
        return errs;
      }
      if (schema.format === 'int32' && (value < -(2 ** 31) || value >= 2 ** 31)) errs.push(`${at}: out of int32 range`);
      if (schema.minimum !== undefined && value < schema.minimum) errs.push(`${at}: less than ${schema.minimum}`);
      if (schema.maximum !== undefined && value > schema.maximum) errs.push(`${at}: greater than ${schema.maximum}`);
      break;
    }
    case 'boolean':
      if (typeof value !== 'boolean') errs.push(`${at}: expected boolean`);
      break;
    default:
      break;
  }
  if (schema.enum !== undefined && !schema.enum.includes(value))
    errs.push(`${at}: ${JSON.stringify(value)} is not one of ${schema.enum.map((e) => JSON.stringify(e)).join(', ')}`);
  return errs;
}
