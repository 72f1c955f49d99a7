// A label or field selector the apiserver would refuse. The message is the text apimachinery's
// parser returns, which the apiserver sends unchanged as the message of a 400 BadRequest Status.
export class SelectorParseError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SelectorParseError';
  }
}
