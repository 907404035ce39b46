/** An answer other than 200 that the console's API gives on purpose: its status and a sentence saying why. */
export class ApiError extends Error {
  constructor(
    readonly status: 400 | 401 | 403 | 404 | 409 | 413 | 503,
    message: string,
  ) {
    super(message);
  }
}
