// The CustomResourceDefinitions of the cluster, followed by one reflector, so the custom resources
// Levee caches follow them: one created after Levee started is cached once it is established, one
// deleted stops being cached, and a change of its versions, selectable fields or printer columns
// restarts its cache on what the apiserver now serves. Only a summary of each CRD is kept (names,
// scope, versions, selectable fields, printer columns, conditions), never its schemas, which can be
// large and many.
import type { Logger } from '../log/logger.ts';
import type { CacheMetrics } from '../metrics/metrics.ts';
import { Reflector } from '../reflector/reflector.ts';
import { customResourceFields } from '../selectors/customresource.ts';
import { Store } from '../store/store.ts';
import type { UpstreamPools } from '../upstream/pools.ts';
import { compareKubeAwareVersions } from './names.ts';
import type { PrinterColumn, ResourceInfo } from '../api/resource.ts';

export const DEFINITIONS: ResourceInfo = {
  group: 'apiextensions.k8s.io',
  version: 'v1',
  resource: 'customresourcedefinitions',
  kind: 'CustomResourceDefinition',
  namespaced: false,
  prefix: '/apis/apiextensions.k8s.io/v1',
};

export const DEFINITIONS_NAME = 'customresourcedefinitions.apiextensions.k8s.io';

/** What Levee needs of one CustomResourceDefinition. */
export interface Definition {
  /** plural.group, which is also the resource's name as --cache spells it. */
  name: string;
  uid: string;
  generation: number;
  deleting: boolean;
  established: boolean;
  group: string;
  plural: string;
  kind: string;
  listKind: string;
  namespaced: boolean;
  versions: Array<{ name: string; served: boolean; selectableFields: string[]; printerColumns?: PrinterColumn[] }>;
}

/** The resource as the apiserver serves it now, or why it does not. */
export type Resolution = { info: ResourceInfo; signature: string } | { waiting: string };

export const WAITING_TO_EXIST = 'waiting for the resource to exist';

/**
 * Where the custom resource `name` is served, at `pinned` (a version the name gave) or else at its
 * preferred version: the first of its served versions in discovery's order, which is the version
 * discovery and kubectl use for it. The signature changes whenever the apiserver would rebuild the
 * resource's storage (any change of the CRD's spec, or of its accepted names) and end its watches.
 */
export function resolveDefinition(name: string, def: Definition | undefined, pinned: string): Resolution {
  if (!def) return { waiting: `${WAITING_TO_EXIST} (no CustomResourceDefinition ${name})` };
  if (def.deleting) return { waiting: `${WAITING_TO_EXIST} (its CustomResourceDefinition is being deleted)` };
  if (!def.established) return { waiting: `${WAITING_TO_EXIST} (its CustomResourceDefinition is not established yet)` };
  const served = def.versions.filter((v) => v.served);
  const version = pinned === '' ? served.sort((a, b) => compareKubeAwareVersions(b.name, a.name))[0] : served.find((v) => v.name === pinned);
  if (!version) return { waiting: `${WAITING_TO_EXIST} (${pinned === '' ? 'no version' : `version ${pinned}`} served)` };
  const info: ResourceInfo = {
    group: def.group,
    version: version.name,
    resource: def.plural,
    kind: def.kind,
    namespaced: def.namespaced,
    prefix: `/apis/${def.group}/${version.name}`,
    selectableFields: customResourceFields(def.namespaced, version.selectableFields),
    listKind: def.listKind,
    printerColumns: version.printerColumns,
  };
  return { info, signature: `${def.uid}/${def.generation}/${version.name}/${def.kind}/${def.listKind}` };
}

interface PrinterColumnJson {
  name?: string;
  type?: string;
  format?: string;
  description?: string;
  priority?: number;
  jsonPath?: string;
}

interface CrdJson {
  metadata?: { name?: string; uid?: string; resourceVersion?: string; generation?: number; deletionTimestamp?: string };
  spec?: {
    group?: string;
    scope?: string;
    names?: { plural?: string; kind?: string };
    versions?: Array<{ name?: string; served?: boolean; selectableFields?: Array<{ jsonPath?: string }>; additionalPrinterColumns?: PrinterColumnJson[] }>;
  };
  status?: { acceptedNames?: { kind?: string; listKind?: string }; conditions?: Array<{ type?: string; status?: string }> };
}

/** A CRD's bytes reduced to what a Definition needs; resourceVersion stays, for the store. */
export function summarize(raw: Buffer): Buffer {
  const crd = JSON.parse(raw.toString('utf8')) as CrdJson;
  const m = crd.metadata ?? {};
  return Buffer.from(
    JSON.stringify({
      metadata: { name: m.name, uid: m.uid, resourceVersion: m.resourceVersion, generation: m.generation, deletionTimestamp: m.deletionTimestamp },
      spec: {
        group: crd.spec?.group,
        scope: crd.spec?.scope,
        names: { plural: crd.spec?.names?.plural },
        versions: (crd.spec?.versions ?? []).map((v) => ({
          name: v.name,
          served: v.served,
          selectableFields: (v.selectableFields ?? []).map((f) => ({ jsonPath: f.jsonPath })),
          additionalPrinterColumns: v.additionalPrinterColumns,
        })),
      },
      status: {
        acceptedNames: { kind: crd.status?.acceptedNames?.kind, listKind: crd.status?.acceptedNames?.listKind },
        conditions: (crd.status?.conditions ?? []).map((c) => ({ type: c.type, status: c.status })),
      },
    }),
  );
}

export function parseDefinition(item: Buffer): Definition {
  const crd = JSON.parse(item.toString('utf8')) as CrdJson;
  const group = crd.spec?.group ?? '';
  const plural = crd.spec?.names?.plural ?? '';
  return {
    name: crd.metadata?.name ?? `${plural}.${group}`,
    uid: crd.metadata?.uid ?? '',
    generation: crd.metadata?.generation ?? 0,
    deleting: crd.metadata?.deletionTimestamp !== undefined,
    established: (crd.status?.conditions ?? []).some((c) => c.type === 'Established' && c.status === 'True'),
    group,
    plural,
    kind: crd.status?.acceptedNames?.kind ?? '',
    listKind: crd.status?.acceptedNames?.listKind || `${crd.status?.acceptedNames?.kind ?? ''}List`,
    namespaced: crd.spec?.scope === 'Namespaced',
    versions: (crd.spec?.versions ?? []).map((v) => ({
      name: v.name ?? '',
      served: v.served === true,
      selectableFields: (v.selectableFields ?? []).flatMap((f) => (f.jsonPath ? [f.jsonPath] : [])),
      printerColumns: (v.additionalPrinterColumns ?? []).map((c) => ({
        name: c.name ?? '',
        type: c.type ?? '',
        format: c.format ?? '',
        description: c.description ?? '',
        priority: c.priority ?? 0,
        jsonPath: c.jsonPath ?? '',
      })),
    })),
  };
}

export interface DefinitionsOptions {
  pools: UpstreamPools;
  logger: Logger;
  metrics: CacheMetrics;
  /** After every change, once the first list is in: the definitions as they are now. */
  changed: () => void;
}

export class Definitions {
  readonly #store = new Store({ snapshotWindowMs: 0, maxSnapshots: 1 });
  readonly #reflector: Reflector;
  #byName = new Map<string, Definition>();

  constructor(o: DefinitionsOptions) {
    this.#reflector = new Reflector({
      info: DEFINITIONS,
      pools: o.pools,
      store: this.#store,
      logger: o.logger,
      transform: summarize,
      hooks: {
        relisted: (objects, bytes, seconds) => o.metrics.relisted(DEFINITIONS_NAME, objects, bytes, seconds),
        watchRestarted: (reason) => o.metrics.watchRestarted(DEFINITIONS_NAME, reason),
      },
    });
    this.#store.listen({
      event: (e) => {
        if (e.type === 'DELETED') this.#byName.delete(e.object.name);
        else this.#byName.set(e.object.name, parseDefinition(e.object.item));
        o.changed();
      },
      replaced: () => {
        this.#byName = new Map([...this.#store.tree.values()].map((obj) => [obj.name, parseDefinition(obj.item)]));
        o.changed();
      },
      progressed: () => undefined,
    });
  }

  /** True once the definitions have been listed: until then Levee cannot tell which exist. */
  get synced(): boolean {
    return this.#store.synced;
  }

  get(name: string): Definition | undefined {
    return this.#byName.get(name);
  }

  all(): Iterable<Definition> {
    return this.#byName.values();
  }

  start(): void {
    this.#reflector.start();
  }

  stop(): Promise<void> {
    return this.#reflector.stop();
  }
}
