/* Module placeholder so the library exists before its first source lands. */
void ul__net_placeholder(void);
void ul__net_placeholder(void) {}
