export async function main(): Promise<void> { throw new Error("not yet"); }
