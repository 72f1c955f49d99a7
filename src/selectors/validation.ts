// Label key and value validation with apimachinery's exact error strings
// (pkg/api/validate/content: IsLabelKey, IsLabelValue, IsDNS1123Subdomain, RegexError), and the
// field.Error / aggregate formatting the label selector parser returns them in.
import { byteLength, goQuote } from './gostrings.ts';

const labelKeyFmt = '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]';
const labelKeyErrMsg =
  "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const labelKeyMaxLength = 63;
const labelKeyRegexp = new RegExp('^' + labelKeyFmt + '$');

const labelValueFmt = '(' + labelKeyFmt + ')?';
const labelValueErrMsg =
  "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const labelValueMaxLength = 63;
const labelValueRegexp = new RegExp('^' + labelValueFmt + '$');

const dns1123LabelFmt = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';
const dns1123SubdomainFmt = dns1123LabelFmt + '(\\.' + dns1123LabelFmt + ')*';
const dns1123SubdomainErrorMsg =
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const dns1123SubdomainMaxLength = 253;
const dns1123SubdomainRegexp = new RegExp('^' + dns1123SubdomainFmt + '$');

// content.RegexError, including its doubled space before " or ".
function regexError(msg: string, re: string, ...examples: string[]): string {
  if (examples.length === 0) return msg + " (regex used for validation is '" + re + "')";
  msg += ' (e.g. ';
  examples.forEach((example, i) => {
    if (i > 0) msg += ' or ';
    msg += "'" + example + "', ";
  });
  return msg + "regex used for validation is '" + re + "')";
}

function maxLenError(length: number): string {
  return `must be no more than ${length} bytes`;
}

const emptyError = 'must be non-empty';

function isDNS1123Subdomain(value: string): string[] {
  const errs: string[] = [];
  if (byteLength(value) > dns1123SubdomainMaxLength) errs.push(maxLenError(dns1123SubdomainMaxLength));
  if (!dns1123SubdomainRegexp.test(value)) {
    errs.push(regexError(dns1123SubdomainErrorMsg, dns1123SubdomainFmt, 'example.com'));
  }
  return errs;
}

// content.IsLabelKey: an optional DNS subdomain prefix and '/', then a name part.
export function isLabelKey(value: string): string[] {
  const errs: string[] = [];
  const parts = value.split('/');
  let name: string;
  if (parts.length === 1) {
    name = parts[0] ?? '';
  } else if (parts.length === 2) {
    const prefix = parts[0] ?? '';
    name = parts[1] ?? '';
    if (prefix.length === 0) {
      errs.push('prefix part ' + emptyError);
    } else {
      for (const msg of isDNS1123Subdomain(prefix)) errs.push('prefix part ' + msg);
    }
  } else {
    errs.push(
      'a valid label key ' + regexError(labelKeyErrMsg, labelKeyFmt, 'MyName', 'my.name', '123-abc') +
        " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
    );
    return errs;
  }
  if (name.length === 0) {
    errs.push('name part ' + emptyError);
  } else if (byteLength(name) > labelKeyMaxLength) {
    errs.push('name part ' + maxLenError(labelKeyMaxLength));
  }
  if (!labelKeyRegexp.test(name)) {
    errs.push('name part ' + regexError(labelKeyErrMsg, labelKeyFmt, 'MyName', 'my.name', '123-abc'));
  }
  return errs;
}

// content.IsLabelValue.
export function isLabelValue(value: string): string[] {
  const errs: string[] = [];
  if (byteLength(value) > labelValueMaxLength) errs.push(maxLenError(labelValueMaxLength));
  if (!labelValueRegexp.test(value)) {
    errs.push(regexError(labelValueErrMsg, labelValueFmt, 'MyValue', 'my_value', '12345'));
  }
  return errs;
}

// field.Invalid(path, value, detail).Error() for a string value.
export function invalidValue(path: string, value: string, detail: string): string {
  let s = `${path}: Invalid value: ${goQuote(value)}`;
  if (detail.length > 0) s += ': ' + detail;
  return s;
}

// field.ErrorList.ToAggregate().Error(): duplicates dropped, one error bare, several bracketed.
export function aggregate(messages: readonly string[]): string | undefined {
  const unique = [...new Set(messages)];
  if (unique.length === 0) return undefined;
  if (unique.length === 1) return unique[0];
  return '[' + unique.join(', ') + ']';
}
