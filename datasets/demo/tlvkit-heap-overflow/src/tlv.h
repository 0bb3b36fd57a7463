/* tlvkit: a tiny decoder and encoder for BER-style tag-length-value records.
 *
 * A record is one tag byte, a length, then that many value bytes. A length
 * below 0x80 is one byte (short form). Otherwise the first length byte is
 * 0x80 | n and the next n bytes (1..4) hold the length, big-endian (long
 * form). A tag with bit 0x20 set is "constructed": its value is itself a
 * sequence of records.
 */
#ifndef TLVKIT_TLV_H
#define TLVKIT_TLV_H

#include <stddef.h>
#include <stdint.h>

#define TLV_MAX_LENGTH_BYTES 4
#define TLV_CONSTRUCTED 0x20

enum tlv_status {
    TLV_OK = 0,
    TLV_ERR_TRUNCATED = -1, /* input ends inside a record */
    TLV_ERR_LENGTH = -2,    /* malformed or unsupported length */
    TLV_ERR_TOO_MANY = -3,  /* more records than the caller has room for */
    TLV_ERR_NOSPACE = -4,   /* output buffer too small (encoder) */
    TLV_ERR_DEPTH = -5      /* constructed records nested too deeply */
};

typedef struct {
    uint8_t tag;
    size_t length;
    const uint8_t *value; /* points into the input buffer */
} tlv_item;

/* Decode the record at buf[*pos] (buf holds len bytes). On success fill *out,
 * advance *pos past the record and return TLV_OK; on error leave *pos alone
 * and return a negative tlv_status. */
int tlv_read_item(const uint8_t *buf, size_t len, size_t *pos, tlv_item *out);

/* Decode every record in buf into items[0..max). *count receives the number
 * of records decoded. */
int tlv_parse_all(const uint8_t *buf, size_t len, tlv_item *items, size_t max,
                  size_t *count);

/* First item with the given tag, or NULL. */
const tlv_item *tlv_find(const tlv_item *items, size_t count, uint8_t tag);

/* Encode one record into out (outcap bytes). Returns the number of bytes
 * written, or 0 if it does not fit. */
size_t tlv_encode(uint8_t tag, const uint8_t *value, size_t vlen, uint8_t *out,
                  size_t outcap);

/* Human-readable text for a tlv_status. */
const char *tlv_strerror(int status);

#endif
