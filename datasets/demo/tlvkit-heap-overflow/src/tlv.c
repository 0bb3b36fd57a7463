#include "tlv.h"

#include <string.h>

int tlv_read_item(const uint8_t *buf, size_t len, size_t *pos, tlv_item *out)
{
    size_t p = *pos;
    size_t vlen;
    uint8_t tag, first;

    if (p > len || len - p < 2)
        return TLV_ERR_TRUNCATED;
    tag = buf[p++];
    first = buf[p++];

    if (first & 0x80) {
        size_t n = first & 0x7f;
        size_t i;

        if (n == 0 || n > TLV_MAX_LENGTH_BYTES)
            return TLV_ERR_LENGTH;
        vlen = 0;
        for (i = 0; i < n; i++)
            vlen = (vlen << 8) | buf[p++];
        if (vlen < 0x80)
            return TLV_ERR_LENGTH; /* long form must not encode short lengths */
    } else {
        vlen = first;
    }

    if (vlen > len - p)
        return TLV_ERR_TRUNCATED;

    out->tag = tag;
    out->length = vlen;
    out->value = buf + p;
    *pos = p + vlen;
    return TLV_OK;
}

int tlv_parse_all(const uint8_t *buf, size_t len, tlv_item *items, size_t max,
                  size_t *count)
{
    size_t pos = 0;
    size_t n = 0;

    *count = 0;
    while (pos < len) {
        int rc;

        if (n == max)
            return TLV_ERR_TOO_MANY;
        rc = tlv_read_item(buf, len, &pos, &items[n]);
        if (rc != TLV_OK)
            return rc;
        n++;
        *count = n;
    }
    return TLV_OK;
}

const tlv_item *tlv_find(const tlv_item *items, size_t count, uint8_t tag)
{
    size_t i;

    for (i = 0; i < count; i++)
        if (items[i].tag == tag)
            return &items[i];
    return NULL;
}

size_t tlv_encode(uint8_t tag, const uint8_t *value, size_t vlen, uint8_t *out,
                  size_t outcap)
{
    uint8_t hdr[2 + TLV_MAX_LENGTH_BYTES];
    size_t hlen = 0;

    hdr[hlen++] = tag;
    if (vlen < 0x80) {
        hdr[hlen++] = (uint8_t)vlen;
    } else {
        size_t n = 0, v = vlen;
        int shift;

        while (v) {
            n++;
            v >>= 8;
        }
        if (n > TLV_MAX_LENGTH_BYTES)
            return 0;
        hdr[hlen++] = (uint8_t)(0x80 | n);
        for (shift = (int)(n - 1) * 8; shift >= 0; shift -= 8)
            hdr[hlen++] = (uint8_t)(vlen >> shift);
    }
    if (hlen + vlen > outcap || vlen > outcap)
        return 0;
    memcpy(out, hdr, hlen);
    if (vlen)
        memcpy(out + hlen, value, vlen);
    return hlen + vlen;
}

const char *tlv_strerror(int status)
{
    switch (status) {
    case TLV_OK: return "ok";
    case TLV_ERR_TRUNCATED: return "input truncated";
    case TLV_ERR_LENGTH: return "malformed length";
    case TLV_ERR_TOO_MANY: return "too many records";
    case TLV_ERR_NOSPACE: return "output buffer too small";
    case TLV_ERR_DEPTH: return "records nested too deeply";
    default: return "unknown error";
    }
}
