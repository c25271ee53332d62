/** Largest inner packet the pipelines handle (a TUN MTU up to 9216, jumbo frames): sizes receive slots. */
export const MAX_PACKET = 9216;
