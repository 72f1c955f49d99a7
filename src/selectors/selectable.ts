// Which field selectors the apiserver accepts per built-in resource, and the field values it
// matches them against, for objects as served on the wire (JSON, external version, defaulted).
//
// Two parts of the apiserver decide this, and they do not always agree:
//  - the field label conversion func registered for the served version (pkg/apis/*/v*/
//    conversion.go, AddFieldLabelConversionFunc) decides which labels a request may use, and
//    renames aliases; without one, runtime.DefaultMetaV1FieldSelectorConversion allows only
//    metadata.name and metadata.namespace;
//  - the registry's GetAttrs / ToSelectableFields (pkg/registry/*/*/strategy.go) builds the field
//    set the internal object is matched against; a label it has no entry for reads as "".
// So some fields are in the set but cannot be selected (replicasets status.replicas under apps/v1,
// namespaces "name", persistentvolumes "name", leasecandidates spec.leaseName), and pods accept
// status.podIPs with no field behind it (it equals "" on every pod).
//
// A label the conversion rejects gets a 400 BadRequest whose message is the conversion error:
//   "field label not supported: <label>"                 (core v1, certificates, events.k8s.io)
//   "field label not supported for resource.k8s.io/v1, Kind=ResourceSlice: <label>"
//   "field label \"<label>\" not supported for Job"      (batch/v1 jobs)
//   "\"<label>\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
//                                                        (every resource without a conversion func)
//   "field label not supported: <label>"                 (custom resources: selectors/customresource.ts)
// Callers forward such requests so the apiserver produces that answer itself.
import { FieldSelector } from './fields.ts';

type Json = unknown;
/** The fields beyond metadata.name and metadata.namespace; `item` is the object's JSON as received. */
export type Extract = (obj: Json, item?: Buffer) => Record<string, string>;

/** What one resource (at one version) lets a field selector use, and how its field set is built. */
export interface SelectableFields {
  // Label accepted in a request -> field it selects in the field set.
  readonly labels: ReadonlyMap<string, string>;
  readonly selectable: ReadonlySet<string>;
  readonly extract?: Extract | undefined;
}

function get(obj: Json, ...path: string[]): Json {
  let v = obj;
  for (const key of path) {
    if (v === null || typeof v !== 'object' || !Object.hasOwn(v, key)) return undefined;
    v = (v as Record<string, Json>)[key];
  }
  return v;
}

// A string field; absent (Go's zero value) is "".
function str(obj: Json, ...path: string[]): string {
  const v = get(obj, ...path);
  return typeof v === 'string' ? v : '';
}

// strconv.Itoa of an int32 field; absent is 0.
function int(obj: Json, ...path: string[]): string {
  const v = get(obj, ...path);
  return typeof v === 'number' ? String(Math.trunc(v)) : '0';
}

// strconv.FormatBool / fmt.Sprint of a bool field; absent is false.
function bool(obj: Json, ...path: string[]): string {
  return get(obj, ...path) === true ? 'true' : 'false';
}

function spec(labels: readonly string[], extract?: Extract, aliases: Record<string, string> = {}): SelectableFields {
  const map = new Map<string, string>(labels.map((l) => [l, l]));
  for (const [alias, field] of Object.entries(aliases)) map.set(alias, field);
  return { labels: map, selectable: new Set(map.keys()), extract };
}

const name = 'metadata.name';
const namespace = 'metadata.namespace';
const meta = [name, namespace];

// v1 defaulting keeps status.podIP and status.podIPs in step, status.podIP winning on a mismatch;
// internally the field is status.podIPs[0], which after defaulting is status.podIP.
function podIP(pod: Json): string {
  const ip = str(pod, 'status', 'podIP');
  if (ip !== '') return ip;
  const ips = get(pod, 'status', 'podIPs');
  return Array.isArray(ips) && ips.length > 0 ? str(ips[0], 'ip') : '';
}

const pods = spec(
  [...meta, 'spec.nodeName', 'spec.restartPolicy', 'spec.schedulerName', 'spec.serviceAccountName', 'spec.hostNetwork',
    'status.phase', 'status.podIP', 'status.podIPs', 'status.nominatedNodeName'],
  (pod) => ({
    'spec.nodeName': str(pod, 'spec', 'nodeName'),
    'spec.restartPolicy': str(pod, 'spec', 'restartPolicy'),
    'spec.schedulerName': str(pod, 'spec', 'schedulerName'),
    // Defaulting fills serviceAccountName from the deprecated serviceAccount.
    'spec.serviceAccountName': str(pod, 'spec', 'serviceAccountName') || str(pod, 'spec', 'serviceAccount'),
    'spec.hostNetwork': bool(pod, 'spec', 'hostNetwork'),
    'status.phase': str(pod, 'status', 'phase'),
    'status.podIP': podIP(pod),
    'status.nominatedNodeName': str(pod, 'status', 'nominatedNodeName'),
  }),
  // Old v1 clients sent spec.host.
  { 'spec.host': 'spec.nodeName' },
);

// core/v1 Event carries the fields under their internal names; source falls back to the
// reporting controller when the deprecated source component is empty.
const coreEventFields: Extract = (ev) => ({
  'involvedObject.kind': str(ev, 'involvedObject', 'kind'),
  'involvedObject.namespace': str(ev, 'involvedObject', 'namespace'),
  'involvedObject.name': str(ev, 'involvedObject', 'name'),
  'involvedObject.uid': str(ev, 'involvedObject', 'uid'),
  'involvedObject.apiVersion': str(ev, 'involvedObject', 'apiVersion'),
  'involvedObject.resourceVersion': str(ev, 'involvedObject', 'resourceVersion'),
  'involvedObject.fieldPath': str(ev, 'involvedObject', 'fieldPath'),
  reason: str(ev, 'reason'),
  reportingComponent: str(ev, 'reportingComponent'),
  source: str(ev, 'source', 'component') || str(ev, 'reportingComponent'),
  type: str(ev, 'type'),
});

// events.k8s.io/v1 Event converted to the internal Event: regarding -> involvedObject,
// reportingController -> ReportingController, deprecatedSource -> Source.
const eventsV1Fields: Extract = (ev) => ({
  'involvedObject.kind': str(ev, 'regarding', 'kind'),
  'involvedObject.namespace': str(ev, 'regarding', 'namespace'),
  'involvedObject.name': str(ev, 'regarding', 'name'),
  'involvedObject.uid': str(ev, 'regarding', 'uid'),
  'involvedObject.apiVersion': str(ev, 'regarding', 'apiVersion'),
  'involvedObject.resourceVersion': str(ev, 'regarding', 'resourceVersion'),
  'involvedObject.fieldPath': str(ev, 'regarding', 'fieldPath'),
  reason: str(ev, 'reason'),
  reportingComponent: str(ev, 'reportingController'),
  source: str(ev, 'deprecatedSource', 'component') || str(ev, 'reportingController'),
  type: str(ev, 'type'),
});

const eventsV1Aliases: Record<string, string> = {
  'regarding.kind': 'involvedObject.kind',
  'regarding.namespace': 'involvedObject.namespace',
  'regarding.name': 'involvedObject.name',
  'regarding.uid': 'involvedObject.uid',
  'regarding.apiVersion': 'involvedObject.apiVersion',
  'regarding.resourceVersion': 'involvedObject.resourceVersion',
  'regarding.fieldPath': 'involvedObject.fieldPath',
  reportingController: 'reportingComponent',
};

const defaultSpec = spec(meta);

// Built-in resources served by kube-apiserver (v1.37) that can be listed and watched. Those not
// named in `special` use the default conversion and the metadata-only field set.
const builtin: Readonly<Record<string, readonly string[]>> = {
  '': ['configmaps', 'endpoints', 'events', 'limitranges', 'namespaces', 'nodes', 'persistentvolumeclaims',
    'persistentvolumes', 'pods', 'podtemplates', 'replicationcontrollers', 'resourcequotas', 'secrets',
    'serviceaccounts', 'services'],
  'admissionregistration.k8s.io': ['mutatingadmissionpolicies', 'mutatingadmissionpolicybindings',
    'mutatingwebhookconfigurations', 'validatingadmissionpolicies', 'validatingadmissionpolicybindings',
    'validatingwebhookconfigurations'],
  'apiextensions.k8s.io': ['customresourcedefinitions'],
  'apiregistration.k8s.io': ['apiservices'],
  apps: ['controllerrevisions', 'daemonsets', 'deployments', 'replicasets', 'statefulsets'],
  autoscaling: ['horizontalpodautoscalers'],
  batch: ['cronjobs', 'jobs'],
  'certificates.k8s.io': ['certificatesigningrequests', 'clustertrustbundles', 'podcertificaterequests'],
  'coordination.k8s.io': ['leases', 'leasecandidates'],
  'discovery.k8s.io': ['endpointslices'],
  'events.k8s.io': ['events'],
  'flowcontrol.apiserver.k8s.io': ['flowschemas', 'prioritylevelconfigurations'],
  'networking.k8s.io': ['ingressclasses', 'ingresses', 'ipaddresses', 'networkpolicies', 'servicecidrs'],
  'node.k8s.io': ['runtimeclasses'],
  policy: ['poddisruptionbudgets'],
  'rbac.authorization.k8s.io': ['clusterrolebindings', 'clusterroles', 'rolebindings', 'roles'],
  'resource.k8s.io': ['deviceclasses', 'devicetaintrules', 'resourceclaims', 'resourceclaimtemplates', 'resourceslices'],
  'scheduling.k8s.io': ['priorityclasses'],
  'storage.k8s.io': ['csidrivers', 'csinodes', 'csistoragecapacities', 'storageclasses', 'volumeattachments',
    'volumeattributesclasses'],
  'storagemigration.k8s.io': ['storageversionmigrations'],
};

const special: ReadonlyMap<string, SelectableFields> = new Map<string, SelectableFields>([
  ['/pods', pods],
  // Node and Namespace conversions do not accept metadata.namespace.
  ['/nodes', spec([name, 'spec.unschedulable'], (node) => ({ 'spec.unschedulable': bool(node, 'spec', 'unschedulable') }))],
  ['/namespaces', spec([name, 'status.phase'], (ns) => ({
    'status.phase': str(ns, 'status', 'phase'),
    // In the field set "for backward compatibility", but the conversion rejects it.
    name: str(ns, 'metadata', 'name'),
  }))],
  ['/replicationcontrollers', spec([...meta, 'status.replicas'], (rc) => ({ 'status.replicas': int(rc, 'status', 'replicas') }))],
  ['/events', spec([...meta, 'involvedObject.kind', 'involvedObject.namespace', 'involvedObject.name',
    'involvedObject.uid', 'involvedObject.apiVersion', 'involvedObject.resourceVersion', 'involvedObject.fieldPath',
    'reason', 'reportingComponent', 'source', 'type'], coreEventFields)],
  ['/secrets', spec([...meta, 'type'], (s) => ({ type: str(s, 'type') }))],
  ['/services', spec([...meta, 'spec.clusterIP', 'spec.type'], (svc) => ({
    'spec.clusterIP': str(svc, 'spec', 'clusterIP'),
    'spec.type': str(svc, 'spec', 'type'),
  }))],
  // "name" is in both field sets but only the default conversion applies, which rejects it.
  ['/persistentvolumes', spec(meta, (pv) => ({ name: str(pv, 'metadata', 'name') }))],
  ['/persistentvolumeclaims', spec(meta, (pvc) => ({ name: str(pvc, 'metadata', 'name') }))],
  // apps/v1 registers no conversion func, so status.replicas cannot be selected.
  ['apps/replicasets', spec(meta, (rs) => ({ 'status.replicas': int(rs, 'status', 'replicas') }))],
  ['batch/jobs', spec([...meta, 'status.successful'], (job) => ({ 'status.successful': int(job, 'status', 'succeeded') }))],
  ['certificates.k8s.io/certificatesigningrequests',
    spec([name, 'spec.signerName'], (csr) => ({ 'spec.signerName': str(csr, 'spec', 'signerName') }))],
  ['certificates.k8s.io/clustertrustbundles',
    spec([name, 'spec.signerName'], (ctb) => ({ 'spec.signerName': str(ctb, 'spec', 'signerName') }))],
  // Namespaced, yet the conversion does not accept metadata.namespace.
  ['certificates.k8s.io/podcertificaterequests', spec([name, 'spec.signerName', 'spec.podName', 'spec.nodeName'], (pcr) => ({
    'spec.signerName': str(pcr, 'spec', 'signerName'),
    'spec.podName': str(pcr, 'spec', 'podName'),
    'spec.nodeName': str(pcr, 'spec', 'nodeName'),
  }))],
  ['resource.k8s.io/resourceslices', spec([name, 'spec.nodeName', 'spec.driver', 'spec.pool.name'], (slice) => ({
    'spec.nodeName': str(slice, 'spec', 'nodeName'),
    'spec.driver': str(slice, 'spec', 'driver'),
    'spec.pool.name': str(slice, 'spec', 'pool', 'name'),
  }))],
  // No conversion func for coordination.k8s.io, so spec.leaseName cannot be selected.
  ['coordination.k8s.io/leasecandidates', spec(meta, (lc) => ({ 'spec.leaseName': str(lc, 'spec', 'leaseName') }))],
  // Only the events.k8s.io names are accepted; involvedObject.* and source are rejected there.
  ['events.k8s.io/events', spec([...meta, 'reason', 'type'], eventsV1Fields, eventsV1Aliases)],
]);

/**
 * The field labels and field set of a built-in resource; undefined for anything else (custom
 * resources, whose fields come from their CustomResourceDefinition, and aggregated APIs).
 */
export function builtinFields(group: string, resource: string): SelectableFields | undefined {
  const found = special.get(`${group}/${resource}`);
  if (found !== undefined) return found;
  return builtin[group]?.includes(resource) ? defaultSpec : undefined;
}

// The field labels a LIST or WATCH of this resource may use, aliases included; undefined for a
// resource not known here (custom resources, aggregated APIs), which callers forward.
export function selectableFields(group: string, resource: string): ReadonlySet<string> | undefined {
  return builtinFields(group, resource)?.selectable;
}

// The field a request label selects (spec.host -> spec.nodeName, regarding.kind ->
// involvedObject.kind), or undefined when the apiserver would reject the label.
export function normalizeFieldLabel(group: string, resource: string, label: string): string | undefined {
  return builtinFields(group, resource)?.labels.get(label);
}

// The apiserver's Transform of a parsed field selector through the conversion func: every term
// renamed to the field it selects, or undefined if any label is rejected (or the resource unknown).
export function normalizeFieldSelector(group: string, resource: string, selector: FieldSelector): FieldSelector | undefined {
  return convertFieldSelector(builtinFields(group, resource), selector);
}

/** normalizeFieldSelector for a resource's own SelectableFields (a custom resource's, from its CRD). */
export function convertFieldSelector(found: SelectableFields | undefined, selector: FieldSelector): FieldSelector | undefined {
  if (found === undefined) return undefined;
  if (selector.terms.some((t) => !found.labels.has(t.field))) return undefined;
  return selector.transform((field, value) => [found.labels.get(field) ?? field, value]);
}

// The field set an object is matched against, keyed by field (not alias). metadata.namespace is
// always present, "" for cluster-scoped objects, which matches as the apiserver's missing field.
// An unknown resource gets the metadata fields only.
export function fieldsOf(group: string, resource: string, obj: Json): Record<string, string> {
  return fieldSet(builtinFields(group, resource), obj);
}

/** fieldsOf for a resource's own SelectableFields; `item` is the object's JSON, for exact numbers. */
export function fieldSet(found: SelectableFields | undefined, obj: Json, item?: Buffer): Record<string, string> {
  const fields: Record<string, string> = {
    [name]: str(obj, 'metadata', 'name'),
    [namespace]: str(obj, 'metadata', 'namespace'),
  };
  const extract = found?.extract;
  return extract === undefined ? fields : Object.assign(fields, extract(obj, item));
}
