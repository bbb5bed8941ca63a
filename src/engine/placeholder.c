/* Module placeholder so the library exists before its first source lands. */
void ul__engine_placeholder(void);
void ul__engine_placeholder(void) {}
