// A cached resource as the apiserver describes it (discovery, or its CustomResourceDefinition):
// the vocabulary the reflector, the store's encoders, the watchers and the handlers share.
import { builtinFields, type SelectableFields } from '../selectors/selectable.ts';

export interface ResourceInfo {
  group: string;
  version: string;
  resource: string;
  kind: string;
  namespaced: boolean;
  /** "/api/v1" or "/apis/apps/v1". */
  prefix: string;
  /**
   * A custom resource's field selectors at this version, from its CRD. Built-in resources leave it
   * out: their field selectors are the apiserver's code (selectors/selectable.ts).
   */
  selectableFields?: SelectableFields | undefined;
  /**
   * A custom resource's list kind (its CRD's accepted listKind). Its lists are unstructured: the
   * apiserver writes their keys sorted (apiVersion, items, kind, metadata).
   */
  listKind?: string | undefined;
  /**
   * A custom resource's additionalPrinterColumns at this version, from its CRD (kubectl's Table);
   * a CRD without any has Age.
   */
  printerColumns?: readonly PrinterColumn[] | undefined;
}

/** One of a CRD's additionalPrinterColumns. */
export interface PrinterColumn {
  name: string;
  type: string;
  format: string;
  description: string;
  priority: number;
  jsonPath: string;
}

/** The field selectors of a cached resource: its CRD's, or the built-in table's. */
export function fieldsOfResource(info: ResourceInfo): SelectableFields | undefined {
  return info.selectableFields ?? builtinFields(info.group, info.resource);
}

/** The apiVersion objects of a group and version carry: "v1" for the core group, "apps/v1" else. */
export function apiVersionOf(r: { group: string; version: string }): string {
  return r.group === '' ? r.version : `${r.group}/${r.version}`;
}
