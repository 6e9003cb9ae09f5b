// The server under test, as the Go test that runs these files passes it.
export const url = process.env.AOTLM_URL;
export const model = process.env.AOTLM_MODEL;
export const key = process.env.AOTLM_KEY;
if (!url || !model || !key) {
  throw new Error('AOTLM_URL, AOTLM_MODEL and AOTLM_KEY must name the server under test (go test ./serve -run TestOfficialClients sets them)');
}

// weather is the function tool the tool tests offer; the short city
// keeps a constrained call within the small test model's context.
export const weatherSchema = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 8 } },
  required: ['city'],
  additionalProperties: false,
};
