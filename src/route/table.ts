// placeholder: the packet/route helper replaces this file. Contract documented in its brief.
export {};
